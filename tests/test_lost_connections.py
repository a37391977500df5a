"""PostgreSQL without a ping per checkout: a pooled connection is pinged only after it sat idle (the database may have
restarted meanwhile), and one dropped while in use costs one 503 with Retry-After, after which the pool is fresh.
(A database restart is played by ``pg_terminate_backend`` on this app's own connection: the other test workers
share the server.)"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout import database
from checkout.extensions import db
from tests.conftest import POSTGRES_URL

pytestmark = pytest.mark.skipif(
    not POSTGRES_URL, reason="needs PostgreSQL (TEST_DATABASE_URL=postgresql+psycopg://...): a file never hangs up"
)


@pytest.fixture
def one_connection(app: Flask) -> int:
    """The app's pool holding exactly one connection, checked in: its server process id."""
    with app.app_context():
        db.engine.dispose()
        pid = int(db.session.scalar(sa.text("SELECT pg_backend_pid()")) or 0)
        db.session.commit()
    return pid


def backend_pid(app: Flask) -> int:
    with app.app_context():
        pid = int(db.session.scalar(sa.text("SELECT pg_backend_pid()")) or 0)
        db.session.commit()
    return pid


def terminate(pid: int) -> None:
    """What a database restart does to one connection: the server ends it."""
    admin = sa.create_engine(POSTGRES_URL)
    try:
        with admin.begin() as connection:
            # Waits (up to 5 s) until the process has gone, so the next query cannot race its exit.
            assert connection.scalar(sa.text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid})
    finally:
        admin.dispose()


def test_a_connection_dropped_while_idle_is_replaced_before_the_request_uses_it(
    app: Flask, client: FlaskClient, one_connection: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "IDLE_PING_SECONDS", 0.0)  # the connection has sat idle long enough
    terminate(one_connection)
    assert client.get("/api/products").status_code == 200
    assert backend_pid(app) != one_connection


def test_a_connection_in_use_is_not_pinged_before_each_checkout(
    app: Flask, client: FlaskClient, one_connection: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    with app.app_context():
        dialect = db.engine.dialect
    pings: list[object] = []
    real_ping = dialect.do_ping
    monkeypatch.setattr(dialect, "do_ping", lambda connection: pings.append(connection) or real_ping(connection))
    for _ in range(3):
        assert client.get("/api/products").status_code == 200
    assert pings == [] and backend_pid(app) == one_connection


def test_a_connection_dropped_while_in_use_costs_one_503_and_the_retry_gets_a_fresh_one(
    app: Flask, client: FlaskClient, one_connection: int
) -> None:
    terminate(one_connection)  # just used: not pinged, so the request meets the dropped connection
    first = client.get("/api/products")
    assert first.status_code == 503 and first.mimetype == "application/problem+json"
    assert int(first.headers["Retry-After"]) >= 1
    assert client.get("/api/products").status_code == 200
    assert backend_pid(app) != one_connection
