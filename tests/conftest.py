"""Fixtures: a fresh real database per test (SQLite file, or a PostgreSQL
schema when TEST_DATABASE_URL points at one), the app, its clients, and a
live threaded server for concurrency and browser tests."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner
from werkzeug.serving import make_server

from checkout import create_app
from checkout.config import parse_bool, settings
from checkout.database import writing
from checkout.extensions import db
from checkout.shop.seed import seed
from tests.helpers import Ledger
from tests.rabbitmq import Rabbit, rabbit_for
from tests.redis_server import own_redis_database
from tests.relays import OUTBOX, WEBHOOKS, RelayProcess, relay_forever

POSTGRES_URL = os.environ.get("TEST_DATABASE_URL", "")


def _postgres_schema_url(base: str, schema: str) -> str:
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture(autouse=True)
def _instance_folder(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets and files of every app a test makes (gunicorn servers included) go to the test's own folder,
    never into the developer's instance/."""
    monkeypatch.setenv("CHECKOUT_INSTANCE_PATH", str(tmp_path / "instance"))


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A clean database for one test. SQLite: a file (``make_app`` makes it a copy of the first one it seeded).
    PostgreSQL: for a test that takes ``app``, this process's own schema, emptied and seeded again (some 30 ms,
    where creating a schema's tables takes 150 on this machine, most of it the server's); for any other test (its
    own tables, its migrations), a fresh empty schema."""
    if POSTGRES_URL and "app" in request.fixturenames:
        overrides = request.getfixturevalue("app_overrides")
        yield _postgres_schema_again(parse_bool(overrides.get("CHECKOUT_LAB", os.environ.get("CHECKOUT_LAB", True))))
        return
    with own_database(tmp_path / "test.sqlite3", prefix="t") as url:
        yield url


@contextmanager
def own_database(sqlite_file: Path, prefix: str) -> Iterator[str]:
    """A database of its own, empty: the SQLite file ``sqlite_file``, or, with TEST_DATABASE_URL, a new PostgreSQL
    schema named after ``prefix`` (dropped at the end)."""
    if not POSTGRES_URL:
        yield f"sqlite:///{sqlite_file}"
        return
    schema, admin = f"{prefix}_{uuid.uuid4().hex[:12]}", sa.create_engine(POSTGRES_URL)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield _postgres_schema_url(POSTGRES_URL, schema)
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


_SEEDED: dict[str, bool] = {}  # a PostgreSQL schema's URL -> whether it was seeded with the lab on
_SEEDERS: dict[bool, Flask] = {}  # the app that seeds it again, with the lab on and off


def _postgres_schema_again(lab: bool) -> str:
    """This process's schema for apps with the lab on (or off): made and seeded once, then emptied row by row
    and seeded again before each test (nothing of the last test's stays: its servers and apps are gone)."""
    seeder = _SEEDERS.get(lab)
    if seeder is None:
        schema = f"again_{os.getpid()}_{int(lab)}"
        admin = sa.create_engine(POSTGRES_URL)
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        admin.dispose()
        atexit.register(_drop_schema, schema)
        url = _postgres_schema_url(POSTGRES_URL, schema)
        _SEEDERS[lab] = make_app(url, tempfile.mkdtemp(prefix="checkout-seeder-"), CHECKOUT_LAB=lab)
        _SEEDED[url] = lab
        return url
    with seeder.app_context():
        with db.engine.begin() as connection:
            connection.exec_driver_sql(";".join(f'DELETE FROM "{t.name}"' for t in reversed(db.metadata.sorted_tables)))
        with writing():
            seed(demo_customers=True)
        db.session.remove()
    return str(seeder.config["SQLALCHEMY_DATABASE_URI"])


def _drop_schema(schema: str) -> None:
    admin = sa.create_engine(POSTGRES_URL)
    with admin.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    admin.dispose()


def make_app(database_url: str, instance_path: str, **overrides: Any) -> Flask:
    """An app of this tree on ``database_url``, its schema created and seeded (a fresh SQLite file is a copy of
    the first one this process seeded, with the lab on or off as this one: a copy costs a millisecond, the schema
    and the seed some fifty)."""
    config = {
        "TESTING": True,
        "SECRET_KEY": "test-secret-key",
        "CHECKOUT_FINGERPRINT_SECRET": "test-fingerprint-secret",
        "SQLALCHEMY_DATABASE_URI": database_url,
        "CHECKOUT_SLOW_CARD_SECONDS": 1.5,
        "CHECKOUT_BROWSER_WAIT_SECONDS": 8.0,
        "CHECKOUT_WEBHOOK_SECRET": "test-webhook-secret",
        "CHECKOUT_AMQP_URL": "off",  # no test talks to RabbitMQ unless it asks (tests/rabbitmq.py)
        **overrides,
    }
    target = _new_sqlite_file(database_url)
    lab = parse_bool(config.get("CHECKOUT_LAB", os.environ.get("CHECKOUT_LAB", True)))
    template = _TEMPLATES.get(lab) if target is not None else None
    if target is not None and template is not None:
        shutil.copyfile(template, target)
        target.chmod(0o600)
    app = create_app(config, instance_path=instance_path)
    if (template is not None or _SEEDED.get(database_url) is lab) and settings(app).lab == lab:
        return app
    with app.app_context():
        db.create_all()  # tests only; the app's schema comes from migrations
        with writing():
            seed(demo_customers=True)
        db.session.remove()
        if target is not None and settings(app).lab == lab:
            _keep_as_template(target, lab)
    return app


_TEMPLATES: dict[bool, Path] = {}  # this process's first seeded SQLite file, with the lab on and off


def _new_sqlite_file(database_url: str) -> Path | None:
    prefix = "sqlite:///"
    if not database_url.startswith(prefix) or ":memory:" in database_url:
        return None
    path = Path(database_url.removeprefix(prefix).split("?", 1)[0])
    return None if path.exists() else path


def _keep_as_template(seeded: Path, lab: bool) -> None:
    with db.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file
    # Copying opens and closes the file, and closing any descriptor of a file drops every POSIX lock this process
    # holds on it: a connection left open would lose its locks, and the next process to close the database would
    # think itself the last and delete the WAL under it (its later writes seen by this process alone).
    db.engine.dispose()
    folder = Path(tempfile.mkdtemp(prefix="checkout-template-"))
    atexit.register(shutil.rmtree, folder, True)
    shutil.copyfile(seeded, folder / seeded.name)
    _TEMPLATES[lab] = folder / seeded.name


@pytest.fixture
def app_overrides() -> dict[str, Any]:
    """Override in a test module to change the app's configuration."""
    return {}


@pytest.fixture
def app(database_url: str, tmp_path: Any, app_overrides: dict[str, Any]) -> Iterator[Flask]:
    app = make_app(database_url, str(tmp_path / "instance"), **app_overrides)
    yield app
    close(app)


@pytest.fixture
def lab_off(database_url: str, tmp_path: Any) -> Iterator[Flask]:
    """A second app on the test's database, with the lab off (the ``app`` fixture keeps it on)."""
    app = make_app(database_url, str(tmp_path / "lab-off"), CHECKOUT_LAB=False)
    yield app
    close(app)


def close(app: Flask) -> None:
    """A test's app, done: no operation a 202 left to carry on goes into the next test, nor any connection."""
    app.extensions["idempotency.carriers"].stop()
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def instance(tmp_path: Path) -> Path:
    """An empty instance folder of the test's own for the servers it starts (gunicorn, behind nginx or not)."""
    path = tmp_path / "gunicorn"
    path.mkdir()
    return path


@pytest.fixture
def redis_url() -> Iterator[str]:
    """The tests' Redis database, empty (skipped if no Redis answers): tests/redis_server.py. A module that
    serves the app on it says so in its ``app_overrides``."""
    with own_redis_database() as url:
        yield url


@pytest.fixture
def rabbit(app: Flask, database_url: str) -> Iterator[Rabbit]:
    """RabbitMQ for this test, on an exchange of its own (skipped if none answers): tests/rabbitmq.py."""
    with rabbit_for(app, database_url) as found:
        yield found


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def runner(app: Flask) -> FlaskCliRunner:
    return app.test_cli_runner()


@pytest.fixture
def ledger(app: Flask) -> Ledger:
    return Ledger(app)


@dataclass
class LiveServer:
    url: str
    app: Flask
    posts: list[str] = field(default_factory=list)
    answers: list[tuple[str, str, str]] = field(default_factory=list)  # (path, status, Location) of each POST
    arrived: threading.Condition = field(default_factory=threading.Condition)
    at_work: int = 0  # requests the server is answering now (counted under ``arrived``)

    def post_count(self, path: str) -> int:
        with self.arrived:
            return sum(1 for p in self.posts if p == path)

    def wait_for_posts(self, path: str, count: int, timeout: float = 10) -> bool:
        """Block until the server has received ``count`` POSTs to ``path`` (an event, not a sleep)."""
        with self.arrived:
            return self.arrived.wait_for(lambda: self.posts.count(path) >= count, timeout)

    def answer_count(self, path: str) -> int:
        """How many POSTs to ``path`` the server has answered so far (a POST still at work is not counted)."""
        with self.arrived:
            return sum(1 for a in self.answers if a[0] == path)

    def wait_for_answers(self, path: str, count: int, timeout: float = 20) -> list[tuple[str, str]]:
        """Block until ``count`` POSTs to ``path`` were answered; their (status, Location)."""
        with self.arrived:
            self.arrived.wait_for(lambda: sum(a[0] == path for a in self.answers) >= count, timeout)
            return [(status, location) for p, status, location in self.answers if p == path]

    def wait_until_idle(self, timeout: float = 10) -> bool:
        """Block until no request is in the app: each has ended its app context and given its database
        connection back, so the test's engine can be disposed of with none of them still out."""
        with self.arrived:
            return self.arrived.wait_for(lambda: self.at_work == 0, timeout)


class _CountPosts:
    """WSGI middleware that records every POST the server receives, and counts the requests at work."""

    def __init__(self, wsgi_app: Any, server: LiveServer) -> None:
        self.wsgi_app = wsgi_app
        self.server = server

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        with self.server.arrived:
            self.server.at_work += 1
        try:  # Flask pops the request's context (its database session) before it returns the body to send
            return self._record(environ, start_response)
        finally:
            with self.server.arrived:
                self.server.at_work -= 1
                self.server.arrived.notify_all()

    def _record(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] != "POST":
            return self.wsgi_app(environ, start_response)
        path = environ["PATH_INFO"]
        with self.server.arrived:
            self.server.posts.append(path)
            self.server.arrived.notify_all()

        def recording_start_response(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
            location = dict(headers).get("Location", "")
            with self.server.arrived:
                self.server.answers.append((path, status.split()[0], location))
                self.server.arrived.notify_all()
            return start_response(status, headers, *args)

        return self.wsgi_app(environ, recording_start_response)


@pytest.fixture
def live_server(app: Flask) -> Iterator[LiveServer]:
    """The app on a real threaded WSGI server with a file database (no shared in-memory connection)."""
    app.config["TESTING"] = False  # errors become pages, as a user sees them
    server_info = LiveServer(url="", app=app)
    server = make_server("127.0.0.1", 0, _CountPosts(app, server_info), threaded=True)
    server_info.url = f"http://127.0.0.1:{server.server_port}"
    settings(app).shop_url = server_info.url  # where the lab's own requests (and webhooks) go
    # poll_interval: shutdown() waits for the serving loop to notice; 0.5 s by default, per test.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield server_info
    server.shutdown()
    thread.join(timeout=10)
    # A request still at work (the lab page polls every few seconds) would hold a database connection while the
    # app fixture disposes of the engine: that connection, orphaned, is closed by the garbage collector alone.
    server_info.wait_until_idle()
    server.server_close()


@pytest.fixture
def relays(app: Flask, live_server: LiveServer, database_url: str) -> Iterator[tuple[RelayProcess, RelayProcess]]:
    """Both relays as their own processes, as ``make run`` starts them, working for the live server: for a
    test that waits for an email or a webhook as a user of the shop would. Web workers relay nothing (no
    thread); without this fixture nothing sends mail or webhooks unless the test does it itself."""
    with relay_forever(app, database_url, OUTBOX) as outbox, relay_forever(app, database_url, WEBHOOKS) as webhooks:
        yield outbox, webhooks
        assert (outbox.stop(), webhooks.stop()) == (0, 0), (outbox.output(), webhooks.output())


@pytest.hookimpl(trylast=True)  # after tests/browser/conftest.py has marked its tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that start servers, drive a browser or take seconds first, each in its file's order: pytest-xdist's
    workers take the long ones while the quick in-process ones wait, and the run does not end on one long test."""
    items.sort(key=lambda item: not any(item.get_closest_marker(long) for long in ("server", "browser", "slow")))


# --- the browser tests against any running shop: pytest tests/browser --base-url URL ----------

# What a test needs when it looks inside the shop (its ledger, its POST counter, hooks in its code):
# only the shop these tests start in their own process has them.
IN_PROCESS_FIXTURES = frozenset({"app", "database_url"})


def pytest_runtest_setup(item: pytest.Item) -> None:
    """With --base-url, a browser test that needs the shop started by the tests is skipped, saying why."""
    fixtures = list(getattr(item, "fixturenames", ()))
    if (
        item.get_closest_marker("browser")
        and item.config.getoption("base_url", None)
        and IN_PROCESS_FIXTURES & set(fixtures)
    ):
        uses = [name for name in fixtures if name in ("live_server", "ledger", "app", "database_url", "runner")][:2]
        pytest.skip(
            f"uses {', '.join(uses)}: needs the shop the tests start themselves (its ledger, POST counter "
            "or code hooks), not the one at --base-url; run it without --base-url"
        )


@pytest.fixture
def shop_url(request: pytest.FixtureRequest, base_url: str | None) -> str:
    """Where the shop under test answers: the --base-url given, else a live server of this tree."""
    if base_url:
        return base_url.rstrip("/")
    server: LiveServer = request.getfixturevalue("live_server")
    return server.url
