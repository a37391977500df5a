"""Every wait ends: a stopped writer's locks cost a 503 with Retry-After, never a request that hangs.

A "stopped worker" here is a second connection that locks rows and leaves
its transaction open, which is all the database sees of a worker frozen by
SIGSTOP in the middle of a unit of work. Timings are never asserted: a
request that still waits after BOUND_SECONDS fails the test instead of
hanging it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout import database
from checkout.database import table_of, writing
from checkout.extensions import db
from checkout.shop.models import Order, Product
from tests.conftest import POSTGRES_URL, make_app
from tests.helpers import (
    GOOD_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    add_to_cart,
    age_every_record,
    checkout_fields,
    checkout_with_a_mug,
    claim_as_a_dying_worker,
    form_fields,
    order_body,
    pay_in_browser,
    post_order,
    progress_of,
)

postgres_only = pytest.mark.skipif(
    not POSTGRES_URL,
    reason="needs PostgreSQL (TEST_DATABASE_URL=postgresql+psycopg://...): SQLite has no row locks to hold, "
    "and its busy_timeout already bounds the wait for its one writer",
)

# Far longer than any bounded wait here takes; only an unbounded one reaches it.
BOUND_SECONDS = 30
SHORT_MS = 300

products = table_of(Product)
orders = table_of(Order)


class Blocker:
    """A connection that locks rows and leaves its transaction open: all the database sees of a stopped worker.

    Its own engine, without the shop's settings: it waits and holds as long as it is told to.
    """

    def __init__(self, url: str) -> None:
        self.engine = sa.create_engine(url, poolclass=sa.NullPool)
        self.connection = self.engine.connect()

    def lock(self, table: sa.Table, where: Any) -> None:
        """Lock the rows as an UPDATE of them does (FOR NO KEY UPDATE), and keep them."""
        locked = self.connection.execute(sa.select(table.c.id).where(where).with_for_update(key_share=True)).all()
        assert locked, "nothing to lock"

    def release(self) -> None:
        self.connection.rollback()


@pytest.fixture
def blocker(database_url: str) -> Iterator[Blocker]:
    held = Blocker(database_url)
    yield held
    held.connection.close()
    held.engine.dispose()


@pytest.fixture
def short_lock_waits(app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock wait gives up after 0.3 s instead of 5 (the connections opened so far had the default)."""
    monkeypatch.setattr(database, "LOCK_TIMEOUT_MS", SHORT_MS)
    with app.app_context():
        db.engine.dispose()


def answer_while_held(blocker: Blocker, call: Callable[[], Any]) -> Any:
    """Run ``call`` on another thread while ``blocker`` holds its locks; fail if it is still waiting at the bound."""
    done = threading.Event()
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["answer"] = call()
        except BaseException as error:  # handed to the test's thread
            result["error"] = error
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    if not done.wait(BOUND_SECONDS):
        blocker.release()  # let the request finish, so the test can end
        done.wait(BOUND_SECONDS)
        pytest.fail(f"the request still waited for the stopped writer's lock after {BOUND_SECONDS} s")
    if "error" in result:
        raise result["error"]
    return result["answer"]


def gets_the_row(waiter: Blocker, where: Any) -> bool:
    """Whether ``waiter`` can lock the product row within 20 s (its own bound; it then lets go)."""
    waiter.connection.execute(sa.text("SET LOCAL lock_timeout = '20s'"))
    try:
        waiter.lock(products, where)
    except sa.exc.OperationalError:
        return False
    finally:
        waiter.release()
    return True


@postgres_only
def test_every_transaction_runs_read_committed_whatever_the_connection_options_say(
    database_url: str, tmp_path: Any
) -> None:
    # writing() goes on in the read transaction before it, which is the same as a new one only under
    # READ COMMITTED: a server default or PGOPTIONS asking for REPEATABLE READ must not change that.
    url = sa.make_url(database_url)
    asking = " ".join([r"-c default_transaction_isolation=repeatable\ read", url.query.get("options", "")]).strip()
    repeatable = url.update_query_dict({"options": asking}).render_as_string(hide_password=False)
    app = make_app(repeatable, str(tmp_path / "instance"))
    with app.app_context():
        asked = db.session.execute(sa.text("SHOW default_transaction_isolation")).scalar()
        running = db.session.execute(sa.text("SHOW transaction_isolation")).scalar()
        db.session.rollback()
        db.engine.dispose()
    assert (asked, running) == ("repeatable read", "read committed")


# --- a stopped writer's locks: 503 with Retry-After, nothing half-written -------------------------


@postgres_only
def test_every_connection_bounds_its_lock_waits_statements_idle_transactions_and_silent_peers(app: Flask) -> None:
    names = ("lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout")
    with app.app_context():
        query = sa.text("SELECT name, setting FROM pg_settings WHERE name = ANY(:names)")
        settings = dict(db.session.execute(query, {"names": list(names)}).all())
        parameters = db.session.connection().connection.driver_connection.info.get_parameters()
        db.session.rollback()
    assert settings == {
        "lock_timeout": "5000",
        "statement_timeout": "120000",
        "idle_in_transaction_session_timeout": "10000",
    }
    assert {name: parameters.get(name) for name in database.CONNECTION_DEFAULTS} == {
        "connect_timeout": "10",
        "keepalives": "1",
        "keepalives_idle": "30",
        "keepalives_interval": "10",
        "keepalives_count": "3",
    }


@postgres_only
def test_a_purchase_behind_a_stopped_writers_lock_is_503_with_retry_after_then_the_same_key_pays_once(
    client: FlaskClient, ledger: Ledger, blocker: Blocker, short_lock_waits: None
) -> None:
    key = str(uuid.uuid4())
    blocker.lock(products, products.c.sku == "MUG-01")
    answer = answer_while_held(blocker, lambda: post_order(client, key))
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == str(database.RETRY_AFTER_SECONDS)
    assert answer.mimetype == "application/problem+json"
    # The whole claim rolled back: no record, no order, no charge, no audit event.
    assert (ledger.records(), ledger.orders(), ledger.charges(), ledger.events()) == ([], [], [], [])

    blocker.release()
    retry = post_order(client, key)
    assert retry.status_code == 201
    assert [o.status for o in ledger.orders()] == ["paid"]
    assert len(ledger.charges()) == len(ledger.succeeded_charges()) == 1


@postgres_only
def test_a_lock_wait_after_the_charge_is_503_the_lease_is_given_back_and_the_retry_finishes_with_one_charge(
    app: Flask, client: FlaskClient, ledger: Ledger, blocker: Blocker, short_lock_waits: None
) -> None:
    key = str(uuid.uuid4())
    claim_as_a_dying_worker(app, key)  # the order exists, pending; its worker died
    age_every_record(app)  # and its lease ran out: the next retry takes over and calls the gateway
    [order] = ledger.orders()
    blocker.lock(orders, orders.c.id == order.id)  # a stopped writer holds the order's row
    answer = answer_while_held(blocker, lambda: post_order(client, key))
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == str(database.RETRY_AFTER_SECONDS)
    [record] = ledger.records()
    # Released, not left leased: the next retry resumes at once instead of getting 409 for a lease.
    assert progress_of(record) == ("in_progress", "order_created", None, None)
    assert [o.status for o in ledger.orders()] == ["pending"]
    [charge] = ledger.charges()  # the gateway charged; recording it is what waited

    blocker.release()
    retry = post_order(client, key)
    assert retry.status_code == 201
    assert retry.get_json()["charge_id"] == charge.id
    assert [o.status for o in ledger.orders()] == ["paid"]
    assert len(ledger.charges()) == 1


@postgres_only
def test_a_transaction_left_idle_is_ended_by_the_server_its_locks_freed_and_its_next_statement_is_unavailable(
    app: Flask, client: FlaskClient, ledger: Ledger, blocker: Blocker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "IDLE_IN_TRANSACTION_TIMEOUT_MS", SHORT_MS)
    with app.app_context():
        db.engine.dispose()  # the connections opened so far had the default
        with db.engine.connect() as worker:  # one of the shop's own connections
            worker.execute(sa.update(products).where(products.c.sku == "MUG-01").values(stock=products.c.stock))
            # Now idle inside the transaction, as a stopped worker is: another connection gets the row
            # only once the server has ended this session.
            assert gets_the_row(blocker, products.c.sku == "MUG-01"), "the idle transaction kept its row lock"
            with pytest.raises(sa.exc.OperationalError) as ended:  # what the worker meets when it wakes up
                worker.execute(sa.select(1))
        assert ended.value.connection_invalidated
        # The shop goes on, on connections with the shop's own timeout: 300 ms would also end a busy
        # machine's ordinary pauses between two statements (seen once on a loaded full run).
        monkeypatch.undo()
        db.engine.dispose()
    # The dead connection left the pool, the row is free.
    assert post_order(client, str(uuid.uuid4())).status_code == 201
    assert [o.status for o in ledger.orders()] == ["paid"]


# --- the browser's 503 pages carry Retry-After too -------------------------------------------------


@postgres_only
def test_the_checkout_page_behind_a_stopped_writers_lock_is_a_503_page_with_retry_after(
    client: FlaskClient, ledger: Ledger, blocker: Blocker, short_lock_waits: None
) -> None:
    fields = checkout_with_a_mug(client)
    blocker.lock(products, products.c.sku == "MUG-01")
    page = answer_while_held(blocker, lambda: pay_in_browser(client, fields))
    assert page.status_code == 503
    assert page.mimetype == "text/html"
    assert page.headers["Retry-After"] == str(database.RETRY_AFTER_SECONDS)
    assert (ledger.orders(), ledger.charges()) == ([], [])


def test_the_checkout_page_with_the_gateway_down_is_503_with_retry_after(client: FlaskClient) -> None:
    add_to_cart(client)
    page = pay_in_browser(client, checkout_fields(client), UNAVAILABLE_CARD)
    assert page.status_code == 503
    assert page.mimetype == "text/html"
    assert page.headers["Retry-After"] == "1"


def test_the_refund_page_with_the_gateway_down_is_503_with_retry_after(client: FlaskClient) -> None:
    fields = checkout_with_a_mug(client)
    assert pay_in_browser(client, fields, UNAVAILABLE_CARD).status_code == 503  # the card's fault, once
    order_url = pay_in_browser(client, fields, UNAVAILABLE_CARD).headers["Location"]
    form = form_fields(client.get(order_url).get_data(as_text=True), "refund-form")
    page = client.post(f"{order_url}/refunds", data={**form, "amount": "1.00"})  # its refund meets it once too
    assert page.status_code == 503
    assert page.mimetype == "text/html"
    assert page.headers["Retry-After"] == "1"


# --- a pool with no free connection: a bounded wait too ----------------------------------------------


def test_a_request_that_finds_no_free_connection_is_503_with_retry_after(database_url: str, tmp_path: Any) -> None:
    app = make_app(
        database_url,
        str(tmp_path / "instance"),
        SQLALCHEMY_ENGINE_OPTIONS={"pool_size": 1, "max_overflow": 0, "pool_timeout": 0.2},
    )
    try:
        with app.app_context():
            held = db.engine.connect()  # the pool's only connection
            try:
                answer = app.test_client().get("/api/products")
            finally:
                held.close()
        assert answer.status_code == 503
        assert answer.headers["Retry-After"] == str(database.RETRY_AFTER_SECONDS)
    finally:
        with app.app_context():
            db.session.remove()
            db.engine.dispose()


# --- a database error's log line carries no values ---------------------------------------------------

LEAKED_EMAIL = "leak-me@example.com"


@contextmanager
def refusing_orders_from(app: Flask, email: str) -> Iterator[None]:
    """Make the database itself refuse an order for ``email`` (a real constraint error, nothing faked), until the
    end of the block (on PostgreSQL the next test of this process reuses the schema)."""
    with app.app_context(), writing() as session:
        postgres = session.get_bind().dialect.name == "postgresql"
        if postgres:
            session.execute(sa.text(f"ALTER TABLE orders ADD CONSTRAINT refused_email CHECK (email <> '{email}')"))
        else:
            session.execute(
                sa.text(
                    f"CREATE TRIGGER refused_email BEFORE INSERT ON orders WHEN NEW.email = '{email}' "
                    "BEGIN SELECT RAISE(ABORT, 'refused email'); END"
                )
            )
    try:
        yield
    finally:
        with app.app_context(), writing() as session:
            if postgres:
                session.execute(sa.text("ALTER TABLE orders DROP CONSTRAINT refused_email"))
            else:
                session.execute(sa.text("DROP TRIGGER refused_email"))


def test_a_database_error_is_logged_without_the_emails_and_ids_it_was_given(
    app: Flask, client: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    app.config["PROPAGATE_EXCEPTIONS"] = False  # logged and answered as production does
    caplog.set_level(logging.INFO)
    key = str(uuid.uuid4())
    with refusing_orders_from(app, LEAKED_EMAIL):
        answer = post_order(client, key, order_body(email=LEAKED_EMAIL))
    assert answer.status_code == 500
    assert "IntegrityError" in caplog.text  # the error was logged...
    for value in (LEAKED_EMAIL, key, GOOD_CARD.replace(" ", "")):  # ...without what the statement carried
        assert value not in caplog.text


def test_the_unsafe_checkout_with_the_gateway_down_is_503_with_retry_after_too(client: FlaskClient) -> None:
    add_to_cart(client)
    form = form_fields(client.get("/lab/unsafe-checkout").get_data(as_text=True), "unsafe-checkout-form")
    page = client.post("/lab/unsafe-checkout", data={**form, "email": "a@example.com", "card_number": UNAVAILABLE_CARD})
    assert page.status_code == 503
    assert page.headers["Retry-After"] == "1"
