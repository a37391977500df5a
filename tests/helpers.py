"""Helpers the tests share: reading the ledger, and the fields of a form."""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode

import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.audit import IdempotencyEvent, IdempotencyRecord
from checkout.database import utcnow
from checkout.extensions import db
from checkout.gateway import GatewayCharge, GatewayEvent
from checkout.gateway.signing import HEADER, sign
from checkout.lab.tables import LabRequest
from checkout.shop.models import Order, Product
from checkout.shop.payment import API_ENDPOINT
from tests.http import Reply, post_json

ALICE = {"Authorization": "Bearer demo-alice-token"}
BOB = {"Authorization": "Bearer demo-bob-token"}
GOOD_CARD = "4242 4242 4242 4242"
DECLINED_CARD = "4000 0000 0000 0002"
UNAVAILABLE_CARD = "4000 0000 0000 0119"
ANSWER_LOST_CARD = "4000 0000 0000 0259"
SLOW_CARD = "4000 0000 0000 0077"
VERY_SLOW_CARD = "4000 0000 0000 0093"


def order_body(card: str = GOOD_CARD, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "items": [{"sku": "MUG-01", "quantity": 2}, {"sku": "STK-01", "quantity": 1}],
        "email": "alice@example.com",
        "card_number": card,
    }
    body.update(changes)
    return body


class Ledger:
    """What the database holds, read in a fresh transaction each time."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def rows(self, model: Any, *where: Any) -> list[Any]:
        with self.app.app_context():
            rows = list(db.session.scalars(sa.select(model).where(*where)))
            db.session.commit()  # keeps the rows loaded after the session ends
            return rows

    def orders(self, *where: Any) -> list[Order]:
        """The orders, each with the lab's account of it attached (``path``, ``purchase_ref``; checkout.lab.tables),
        filtered by ``where`` on Order or LabOrder."""
        from checkout.lab.tables import LabOrder, path_of_order

        with self.app.app_context():
            rows = db.session.execute(
                sa.select(Order, path_of_order(), LabOrder.purchase_ref)
                .outerjoin(LabOrder, LabOrder.order_id == Order.id)
                .where(*where)
                .order_by(Order.id)
            ).all()
            db.session.commit()  # keeps the rows loaded after the session ends
        for order, path, purchase in rows:
            order.path, order.purchase_ref = path, purchase  # type: ignore[attr-defined]
        return [order for order, _path, _purchase in rows]

    def charges(self, *where: Any) -> list[GatewayCharge]:
        return self.rows(GatewayCharge, *where)

    def succeeded_charges(self) -> list[GatewayCharge]:
        return self.charges(GatewayCharge.status == "succeeded")

    def records(self, *where: Any) -> list[IdempotencyRecord]:
        return self.rows(IdempotencyRecord, *where)

    def events(self, *where: Any) -> list[str]:
        return [e.name for e in sorted(self.rows(IdempotencyEvent, *where), key=lambda e: e.id)]

    def at_the_gateway(self) -> bool:
        """Whether a request has called the gateway: the first of a slow card's duplicates is inside the call."""
        return bool(self.worker_of("gateway_called"))

    def worker_of(self, event: str) -> int:
        """The pid of the worker that recorded ``event`` first (events carry host:pid); 0 if none yet."""
        events = sorted(self.rows(IdempotencyEvent, IdempotencyEvent.name == event), key=lambda e: e.id)
        return int(events[0].worker.rsplit(":", 1)[1]) if events else 0


def stock_out_of_balance(app: Flask) -> dict[str, tuple[int, int, int]]:
    """Products whose seeded stock is not what is left plus what their orders hold: (seeded, left, held)."""
    from checkout.shop.models import HOLDS_STOCK, OrderItem

    with app.app_context():
        held = dict(
            db.session.execute(
                sa.select(OrderItem.sku, sa.func.sum(OrderItem.quantity))
                .join(Order, Order.id == OrderItem.order_id)
                .where(Order.status.in_(HOLDS_STOCK))
                .group_by(OrderItem.sku)
            ).all()
        )
        from checkout.lab.tables import LabStock

        products = db.session.execute(
            sa.select(Product.sku, sa.func.coalesce(LabStock.seeded, 0), Product.stock).outerjoin(
                LabStock, LabStock.sku == Product.sku
            )
        ).all()
        db.session.remove()
    return {
        sku: (seeded, left, int(held.get(sku, 0)))
        for sku, seeded, left in products
        if seeded != left + int(held.get(sku, 0))
    }


def stock_of(app: Flask, sku: str) -> int:
    """A product's stock now."""
    with app.app_context():
        value = db.session.scalar(sa.select(Product.stock).where(Product.sku == sku))
        db.session.remove()
    return int(value or 0)


def table_counts(app: Flask) -> dict[str, int]:
    """How many rows every table holds: a rejected request must leave every count as it was.

    All but the lab's log of the requests under a key, where a known customer's refused POST is noted on
    purpose (tests/test_lab_requests.py)."""
    with app.app_context():
        counts = {
            table.name: int(db.session.scalar(sa.select(sa.func.count()).select_from(table)) or 0)
            for table in db.metadata.sorted_tables
            if table.name != LabRequest.__tablename__
        }
        db.session.remove()
    return counts


@contextlib.contextmanager
def writes_nothing(app: Flask) -> Iterator[None]:
    """The block must leave every table's row count as it was (``table_counts``): a refused request writes nothing."""
    before = table_counts(app)
    yield
    assert table_counts(app) == before


class _FormParser(HTMLParser):
    def __init__(self, form_id: str | None) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "form" and (self.form_id is None or attributes.get("id") == self.form_id):
            self.inside = True
        elif tag == "input" and self.inside and attributes.get("name"):
            self.fields[attributes["name"] or ""] = attributes.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def form_fields(html: str, form_id: str | None = "checkout-form") -> dict[str, str]:
    parser = _FormParser(form_id)
    parser.feed(html)
    return parser.fields


def wait_for(condition: Callable[[], Any], timeout: float = 20) -> Any:
    """Poll until ``condition`` holds: tests synchronise on what the database shows, not on time. The pause grows
    from 10 ms to 100 ms: a quick condition is seen at once, and a wait of seconds (a slow card, a lease) costs
    ten reads a second, not fifty, of the CPU the other tests run on."""
    deadline = time.monotonic() + timeout
    pause, interval = threading.Event(), 0.01
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        pause.wait(interval)
        interval = min(interval * 1.5, 0.1)
    raise AssertionError("the condition never held")


def race(count: int, call: Callable[[int], Any]) -> list[Any]:
    """Start ``count`` calls at the same instant (a barrier, not a sleep); their results in order."""
    barrier = threading.Barrier(count)

    def one(index: int) -> Any:
        barrier.wait()
        return call(index)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


@contextlib.contextmanager
def first_in_progress(url: str, body: Any, key: str, until: Callable[[], Any]) -> Iterator[Future[Reply]]:
    """POST ``body`` to ``url`` as alice under ``key`` on a thread of its own, and run the block once ``until``
    holds (the first request is at its slow gateway): what the block sends is a duplicate of a request in
    progress. The first request's reply is the future's; the block's end waits for it."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(post_json, url, body, {**ALICE, "Idempotency-Key": key})
        wait_for(until)
        yield first


def duplicates_in_progress(
    url: str, body: Any, until: Callable[[], Any], *duplicates: dict[str, str]
) -> tuple[Reply, list[Reply]]:
    """``body`` POSTed to ``url`` as alice under a new key and, once ``until`` holds, one duplicate for each of
    ``duplicates`` (the headers it adds), one after the other: the first request's reply, then theirs."""
    key = str(uuid.uuid4())
    with first_in_progress(url, body, key, until) as first:
        replies = [post_json(url, body, {**ALICE, "Idempotency-Key": key, **headers}) for headers in duplicates]
        return first.result(timeout=30), replies


def duplicates_of_a_slow_order(url: str, ledger: Ledger, *duplicates: dict[str, str]) -> tuple[Reply, list[Reply]]:
    """A slow-card order on the live server at ``url`` and its ``duplicates``, sent while it is inside its
    gateway call (``duplicates_in_progress``)."""
    return duplicates_in_progress(f"{url}/api/orders", order_body(card=SLOW_CARD), ledger.at_the_gateway, *duplicates)


# --- acting on the app ------------------------------------------------------


def bought(purchase: str) -> dict[str, str]:
    """The header naming a request's purchase: the lab's damage table counts every retry and duplicate as one."""
    from checkout.client import PURCHASE_HEADER

    return {PURCHASE_HEADER: purchase}


def post_order(client: FlaskClient, key: str | None, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    """POST /api/orders as alice (unless ``headers`` say otherwise), with ``key`` if given."""
    request_headers = {**ALICE, **(headers or {})}
    if key is not None:
        request_headers["Idempotency-Key"] = key
    return client.post("/api/orders", json=order_body() if body is None else body, headers=request_headers)


def progress_of(record: IdempotencyRecord) -> tuple[str, str, str | None, int | None]:
    """Where a record stands: its state, its recovery point, the owner of its lease, the status it stored."""
    return record.state, record.recovery_point, record.locked_by, record.response_status


def stored_for_the_key(record: IdempotencyRecord) -> tuple[str, int | None, bytes | None]:
    """What a record keeps for its key: the request's fingerprint and the answer stored for it (a refused request
    leaves them as they were)."""
    return record.fingerprint, record.response_status, record.response_body


def claim_as_a_dying_worker(
    app: Flask, key: str, body: dict[str, Any] | None = None, *, lease_seconds: float = 30
) -> object:
    """Do what POST /api/orders does for alice up to its first phase (the order exists), then die.

    Returns what the claim returned: an Operation, or what the key's existing record means.
    """
    from checkout.extensions import once
    from checkout.idempotency import Scope, Settings
    from checkout.idempotency.edge import keyed_fingerprint
    from checkout.idempotency.engine import Asked, begin
    from checkout.shop.answers import ApiResponder
    from checkout.shop.models import Customer
    from checkout.shop.payment import SAFE, OrderRequest, PlaceOrder
    from checkout.shop.schemas import parse_order

    with app.app_context():
        parsed = parse_order(order_body() if body is None else body)
        customer_id = db.session.scalar(sa.select(Customer.id).where(Customer.public_id == "cus_demo_alice"))
        assert customer_id is not None
        request = OrderRequest(customer_id, key, parsed.email, parsed.card_number, items=parsed.lines())
        operation = begin(
            Asked(
                once.store,
                Scope("cus_demo_alice", API_ENDPOINT, key),
                keyed_fingerprint(API_ENDPOINT, parsed.normalized()),
                PlaceOrder(request, ApiResponder(), SAFE).phases(),
                Settings(lease_seconds=lease_seconds),
            )
        )
        db.session.remove()
    return operation


def charge_as_its_holder(app: Flask, reference: str, gateway_key: str, amount: tuple[int, str]) -> str:
    """What a holder's gateway call does before its answer comes back: the gateway charges the key. The charge id."""
    from checkout.shop.payment import gateway

    cents, currency = amount
    with app.app_context():
        charge = gateway().charge(
            gateway_key=gateway_key, amount_cents=cents, currency=currency, card_number=GOOD_CARD, reference=reference
        )
        db.session.remove()
    return charge.id


def expire_every_record(app: Flask) -> None:
    """Let every record outlive its lifetime (CHECKOUT_KEY_LIFETIME_SECONDS): a purge may now take it."""
    with app.app_context():
        db.session.execute(sa.update(IdempotencyRecord).values(expires_at=utcnow() - timedelta(seconds=1)))
        db.session.commit()


def purge_every_record(app: Flask, runner: FlaskCliRunner) -> str:
    """Every record past its lifetime, then ``flask idempotency purge``: what it said (records in progress stay)."""
    expire_every_record(app)
    return runner.invoke(args=["idempotency", "purge"]).output


def reconcile_the_abandoned(app: Flask, runner: FlaskCliRunner) -> str:
    """Every lease run out (``age_every_record``: the workers gone), then ``flask idempotency reconcile``: what it
    said."""
    age_every_record(app)
    return str(runner.invoke(args=["idempotency", "reconcile"]).output)


def abandoned_unpaid_order(app: Flask, client: FlaskClient, runner: FlaskCliRunner) -> str:
    """An order whose gateway was down (503) and whose client never came back, ended ``failed`` by reconcile once
    its lease ran out (its gateway key fenced): the key it was placed under."""
    key = str(uuid.uuid4())
    assert post_order(client, key, order_body(card=UNAVAILABLE_CARD)).status_code == 503
    assert "failed" in reconcile_the_abandoned(app, runner)
    return key


def age_every_record(app: Flask, seconds: float = 3600) -> None:
    """Let time pass for the records: their leases expire, their last update is long ago."""
    past = utcnow() - timedelta(seconds=seconds)
    with app.app_context():
        db.session.execute(
            sa.update(IdempotencyRecord).where(IdempotencyRecord.locked_by.is_not(None)).values(locked_until=past)
        )
        db.session.execute(sa.update(IdempotencyRecord).values(updated_at=past))
        db.session.commit()


def add_to_cart(client: FlaskClient, sku: str = "MUG-01") -> None:
    csrf = form_fields(client.get("/").get_data(as_text=True), form_id=None)["csrf_token"]
    response = client.post("/cart/items", data={"csrf_token": csrf, "sku": sku, "quantity": "1"})
    assert response.status_code == 303


def checkout_fields(client: FlaskClient) -> dict[str, str]:
    page = client.get("/checkout")
    assert page.status_code == 200
    return form_fields(page.get_data(as_text=True))


def checkout_with_a_mug(client: FlaskClient) -> dict[str, str]:
    """A mug put in the cart, then the checkout page opened: its form's fields (the key it rendered)."""
    add_to_cart(client)
    return checkout_fields(client)


def pay_in_browser(
    client: FlaskClient, fields: dict[str, str], card: str = GOOD_CARD, email: str = "shopper@example.com"
) -> Any:
    """Submit the checkout form, as rendered in ``fields``, with an email and a card typed in."""
    return client.post("/checkout", data={**fields, "email": email, "card_number": card})


def session_cookie(client: FlaskClient) -> str:
    """The browser's session cookie now: set again later, it is the cookie of an answer that never arrived."""
    cookie = client.get_cookie("session")
    assert cookie is not None
    return cookie.value


def browser_with_cart(url: str) -> urllib.request.OpenerDirector:
    """A cookie-keeping client of a live server with a mug in its cart (it has not opened the checkout yet)."""
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    csrf = form_fields(browser.open(f"{url}/").read().decode(), form_id=None)["csrf_token"]
    browser.open(f"{url}/cart/items", data=urlencode({"csrf_token": csrf, "sku": "MUG-01"}).encode())
    return browser


def browser_at_checkout(url: str) -> tuple[urllib.request.OpenerDirector, bytes]:
    """A cookie-keeping client of a live server with a mug in its cart, and its filled checkout form (slow card)."""
    browser = browser_with_cart(url)
    fields = form_fields(browser.open(f"{url}/checkout").read().decode())
    return browser, urlencode({**fields, "email": "shopper@example.com", "card_number": SLOW_CARD}).encode()


# --- forcing the moments the defence exists for -------------------------------


class SameInstantLooks:
    """Make the idempotency engine's first ``count`` looks at a key happen at the same instant.

    The engine reads the key's record before it claims the key with an INSERT. A
    request that arrives after a claim is answered by that read, so a test whose
    second request comes a moment later never reaches the claim. Installed, this
    holds each of the first ``count`` looks (after it has read) until all of them
    have read: every one of them saw "no record", and only the atomic claim can
    decide which request runs. ``met`` says whether that really happened.
    """

    def __init__(self, count: int = 2, timeout: float = 10) -> None:
        self.count = count
        self.timeout = timeout
        self.found: list[bool] = []  # for each held look: did it find a record?
        self._barrier = threading.Barrier(count)
        self._lock = threading.Lock()
        self._held = 0

    def install(self, monkeypatch: Any) -> SameInstantLooks:
        from checkout.idempotency import engine

        real_peek = engine.peek

        def peek(scope: Any, *store: Any) -> Any:
            with self._lock:
                hold = self._held < self.count
                self._held += int(hold)
            view = real_peek(scope, *store)
            if hold:
                with self._lock:
                    self.found.append(view is not None)
                with contextlib.suppress(threading.BrokenBarrierError):
                    self._barrier.wait(self.timeout)
            return view

        monkeypatch.setattr(engine, "peek", peek)
        return self

    @property
    def met(self) -> bool:
        """True if ``count`` requests looked together and none of them found a record."""
        return len(self.found) == self.count and not any(self.found) and not self._barrier.broken


def take_over_the_payment(app: Flask, lease_seconds: float = 60) -> Any:
    """What another worker does to the one payment in progress once its lease has run out: take it over.

    The lease is made to run out now (``age_every_record``); the returned Operation
    (a new owner token) holds the record and does nothing more: a new owner still at work.
    """
    from checkout.extensions import once
    from checkout.idempotency import Operation, Scope, Settings
    from checkout.idempotency.engine import take_over

    age_every_record(app)
    [record] = Ledger(app).records()
    with app.app_context():
        view = once.store.find(Scope(record.customer, record.endpoint, record.key))
        assert view is not None
        operation = take_over(once.store, view, Settings(lease_seconds=lease_seconds))
        db.session.remove()
    assert isinstance(operation, Operation), "the payment finished before its lease could be taken over"
    return operation


# --- webhooks, as the gateway would send them ----------------------------------------------

WEBHOOK_SECRET = "test-webhook-secret"  # tests/conftest.py gives every test app this one


def post_webhook(client: FlaskClient, body: bytes, signature: str) -> Any:
    """POST ``body`` to the gateway's webhook endpoint with this Gateway-Signature header, whatever it holds."""
    return client.post("/webhooks/gateway", data=body, content_type="application/json", headers={HEADER: signature})


def signed_post(client: FlaskClient, event: Any, *, secret: str = WEBHOOK_SECRET, age: int = 0) -> Any:
    """POST an event (or these very bytes) to the webhook endpoint, signed ``age`` seconds ago as the gateway signs."""
    body = event if isinstance(event, bytes) else json.dumps(event).encode()
    timestamp = int(utcnow().timestamp()) - age
    return post_webhook(client, body, sign(secret, timestamp, body))


def event_of(ledger: Ledger, type_: str) -> dict[str, Any]:
    [row] = [e for e in ledger.rows(GatewayEvent) if e.type == type_]
    return {"id": row.id, "type": row.type, "created": row.created, "data": row.data}
