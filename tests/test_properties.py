"""The spec's invariants as a property: random sequences of requests, retries,
mismatches, fault cards, crashed workers, lease expiries and reconcile runs on
a handful of keys (two at once, too), and with them refunds (partial, too much,
a refund key reused for another order), the gateway's webhooks delivered in any
order and any number of times, and a race for the last lamp. After every step:
no key has two orders or two charges, replays are byte-identical, a paid order
has exactly one charge, never more is refunded than was charged (in the shop
and in the gateway), the stock balances, each event is applied at most once,
and each paid order has one confirmation email."""

from __future__ import annotations

import json
import uuid
from collections import Counter, defaultdict
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from checkout.config import settings as settings_of
from checkout.database import utcnow
from checkout.extensions import db
from checkout.gateway import GatewayCharge, GatewayRefund
from checkout.gateway.models import GatewayEvent
from checkout.gateway.signing import HEADER, sign
from checkout.gateway.webhooks import body_of
from checkout.lab.tables import LabStock
from checkout.mail.outbox import ORDER_CONFIRMATION, REFUND_RECEIPT, OutboxMessage
from checkout.shop.models import HOLDS_STOCK, REFUND_SUCCEEDED, REFUNDED, Order, OrderItem, Product, Refund
from checkout.shop.payment import gateway
from checkout.shop.reconcile import reconcile
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    DECLINED_CARD,
    GOOD_CARD,
    UNAVAILABLE_CARD,
    age_every_record,
    claim_as_a_dying_worker,
    order_body,
    race,
)

CARDS = [GOOD_CARD, DECLINED_CARD, UNAVAILABLE_CARD, ANSWER_LOST_CARD]
KEYS = 4
REFUND_KEYS = 3
AMOUNTS = [None, 100, 700, 5000]  # None: all that is left
PAID_STATES = ("paid", "partially_refunded", REFUNDED)
THE_LAST_LAMP = [{"sku": "LAST-01", "quantity": 1}]
LEDGER_TABLES = (  # children first
    "lab_refunds",
    "lab_orders",
    "refunds",
    "webhook_receipts",
    "outbox_messages",
    "order_items",
    "orders",
    "gateway_refunds",
    "gateway_events",
    "gateway_charges",
    "gateway_fault_marks",
    "idempotency_records",
    "idempotency_events",
)


@pytest.mark.slow
def test_no_sequence_of_retries_faults_crashes_refunds_and_webhooks_breaks_an_invariant(app: Flask) -> None:
    client = app.test_client()
    secret = settings_of(app).webhook_secret

    class Checkout(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            with app.app_context():  # each example starts from an empty ledger and the seeded stock
                for table in LEDGER_TABLES:
                    db.session.execute(db.metadata.tables[table].delete())
                seeded = sa.select(LabStock.seeded).where(LabStock.sku == Product.sku).scalar_subquery()
                db.session.execute(sa.update(Product).values(stock=seeded))
                db.session.commit()
                db.session.remove()
            prefix = uuid.uuid4().hex[:8]
            self.keys = [f"{prefix}-property-key-{i}" for i in range(KEYS)]
            self.refund_keys = [f"{prefix}-refund-key-{i}" for i in range(REFUND_KEYS)]
            self.cards: dict[str, str] = {}
            self.lamp: dict[str, bool] = {}  # does this key's order ask for the last lamp?
            self.final: dict[str, tuple[int, bytes]] = {}  # the first final answer per key
            self.refund_of: dict[str, tuple[str, int | None]] = {}  # refund key -> (order, amount) it was sent with
            self.refund_final: dict[str, tuple[int, bytes]] = {}
            self.applied: Counter[str] = Counter()  # event id -> deliveries the shop said it applied
            self.steps = 0

        # -- payments ----------------------------------------------------------

        def body(self, key: str, mismatch: bool) -> dict:
            items = THE_LAST_LAMP if self.lamp[key] else order_body()["items"]
            email = "other@example.com" if mismatch else "alice@example.com"
            return order_body(card=self.cards[key], email=email, items=items)

        def pin(self, key: str, card: str, lamp: bool) -> None:
            self.cards.setdefault(key, card)
            self.lamp.setdefault(key, lamp)

        @rule(index=st.integers(0, KEYS - 1), card=st.sampled_from(CARDS), lamp=st.booleans(), mismatch=st.booleans())
        def send(self, index: int, card: str, lamp: bool, mismatch: bool) -> None:
            key = self.keys[index]
            self.pin(key, card, lamp)
            mismatch = mismatch and key in self.final
            response = client.post(
                "/api/orders", json=self.body(key, mismatch), headers={**ALICE, "Idempotency-Key": key}
            )
            self.check(key, mismatch, response)

        @rule(index=st.integers(0, KEYS - 1), card=st.sampled_from(CARDS), lamp=st.booleans())
        def two_duplicates_race(self, index: int, card: str, lamp: bool) -> None:
            key = self.keys[index]
            self.pin(key, card, lamp)
            body = self.body(key, False)
            responses = race(
                2,
                lambda _i: app.test_client().post("/api/orders", json=body, headers={**ALICE, "Idempotency-Key": key}),
            )
            for response in responses:
                assert response.status_code in (201, 402, 409, 422, 503), response.status_code
                if response.status_code in (409, 503):  # lost the race, or the gateway failed first
                    continue
                self.check(key, False, response)

        def check(self, key: str, mismatch: bool, response: Any) -> None:
            assert response.status_code < 500 or response.status_code == 503
            if mismatch:
                assert response.status_code == 422
                assert response.get_json()["type"] == "idempotency-key-reused"
                return
            if response.status_code in (201, 402, 422):
                if response.status_code == 422:
                    assert response.get_json()["type"] == "out-of-stock", response.get_json()
                answer = (response.status_code, response.get_data())
                if key in self.final:
                    assert answer == self.final[key], "a replay differs from the first answer"
                self.final.setdefault(key, answer)
            else:
                assert response.status_code in (409, 503), response.status_code
                assert key not in self.final

        @rule(index=st.integers(0, KEYS - 1), card=st.sampled_from(CARDS), lamp=st.booleans())
        def a_worker_claims_and_dies(self, index: int, card: str, lamp: bool) -> None:
            key = self.keys[index]
            self.pin(key, card, lamp)
            claim_as_a_dying_worker(app, key, self.body(key, False))

        @rule()
        def leases_expire(self) -> None:
            age_every_record(app)

        @rule()
        def reconcile_runs(self) -> None:
            with app.app_context():
                for result in reconcile(gateway()):
                    if result.outcome in ("paid", "declined", "failed"):
                        self.final.pop(result.key, None)  # its stored answer is now the reconciled one
                    if result.outcome == "refunded":
                        self.refund_final.pop(result.key, None)
                db.session.remove()

        # -- refunds -------------------------------------------------------------

        def order_ids(self, *, paid_first: bool = False) -> list[str]:
            """Every order; with ``paid_first``, the paid ones if there are any (refunds of those do the most)."""
            with app.app_context():
                rows = db.session.execute(sa.select(Order.public_id, Order.status).order_by(Order.id)).all()
                db.session.remove()
            paid = [public_id for public_id, status in rows if status in PAID_STATES]
            return paid if paid_first and paid else [public_id for public_id, _ in rows]

        # What a rule draws never depends on the ledger (two racing threads make it vary from run to run):
        # it draws numbers, and picks from what exists by their remainder.

        @rule(pick=st.integers(0, 99), index=st.integers(0, REFUND_KEYS - 1), amount=st.sampled_from(AMOUNTS))
        def refund(self, pick: int, index: int, amount: int | None) -> None:
            key = self.refund_keys[index]
            if key not in self.refund_of:
                ids = self.order_ids(paid_first=pick % 4 != 0)
                if not ids:
                    return
                self.refund_of[key] = (ids[pick % len(ids)], amount)
            order_id, amount = self.refund_of[key]
            response = self.post_refund(order_id, key, amount)
            status = response.status_code
            assert status in (201, 409, 422, 503), (status, response.get_data())
            if status == 422:
                kind = response.get_json()["type"]
                assert kind in ("order-not-refundable", "refund-exceeds-charge"), kind
                if kind == "order-not-refundable":  # not stored: the key is free for another refund
                    assert key not in self.refund_final
                    del self.refund_of[key]
                    return
            if status in (201, 422):
                answer = (status, response.get_data())
                if key in self.refund_final:
                    assert answer == self.refund_final[key], "a refund's replay differs from its first answer"
                self.refund_final.setdefault(key, answer)
            else:
                assert key not in self.refund_final

        @rule(which=st.integers(0, 99), pick=st.integers(0, 99))
        def a_refund_key_reused_for_another_order(self, which: int, pick: int) -> None:
            used = sorted(self.refund_final)
            if not used:
                return
            key = used[which % len(used)]
            others = [order for order in self.order_ids() if order != self.refund_of[key][0]]
            if not others:
                return
            response = self.post_refund(others[pick % len(others)], key, self.refund_of[key][1])
            assert response.status_code == 422, response.get_data()
            assert response.get_json()["type"] == "idempotency-key-reused"

        def post_refund(self, order_id: str, key: str, amount: int | None) -> Any:
            body = {} if amount is None else {"amount_cents": amount}
            return client.post(f"/api/orders/{order_id}/refunds", json=body, headers={**ALICE, "Idempotency-Key": key})

        # -- webhooks ------------------------------------------------------------

        @rule(picks=st.lists(st.integers(0, 99), max_size=6))
        def the_gateway_delivers_events(self, picks: list[int]) -> None:
            """Any of its events, in any order, any of them several times."""
            with app.app_context():
                bodies = [body_of(e) for e in db.session.scalars(sa.select(GatewayEvent).order_by(GatewayEvent.id))]
                db.session.remove()
            for pick in picks if bodies else []:
                self.deliver(bodies[pick % len(bodies)])

        def deliver(self, body: bytes) -> None:
            signature = sign(secret, int(utcnow().timestamp()), body)
            response = client.post(
                "/webhooks/gateway", data=body, content_type="application/json", headers={HEADER: signature}
            )
            assert response.status_code == 200, response.get_data()
            if response.get_json()["result"] == "applied":
                self.applied[json.loads(body)["id"]] += 1

        # -- the invariants --------------------------------------------------------

        @invariant()
        def every_invariant_holds(self) -> None:
            self.steps += 1
            check_ledger(app, recovered=False)
            assert all(count == 1 for count in self.applied.values()), self.applied

        def teardown(self) -> None:
            # Recover whatever was left mid-flight, deliver every event once more; then everything balances.
            age_every_record(app)
            with app.app_context():
                reconcile(gateway())
                bodies = [body_of(event) for event in db.session.scalars(sa.select(GatewayEvent))]
                db.session.remove()
            for body in bodies:
                self.deliver(body)
            check_ledger(app, recovered=True)
            assert all(count == 1 for count in self.applied.values()), self.applied
            LEDGERS.append(summary(app, self.steps))

    run_state_machine_as_test(
        Checkout,
        settings=settings(
            max_examples=50,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )
    print_what_the_ledgers_held()


LEDGERS: list[dict[str, int]] = []


def summary(app: Flask, steps: int) -> dict[str, int]:
    with app.app_context():
        counts = {
            "steps": steps,
            "orders": db.session.scalar(sa.select(sa.func.count()).select_from(Order)) or 0,
            "paid": db.session.scalar(sa.select(sa.func.count()).where(Order.status.in_(PAID_STATES))) or 0,
            "charges": db.session.scalar(sa.select(sa.func.count()).select_from(GatewayCharge)) or 0,
            "refunds": db.session.scalar(sa.select(sa.func.count()).select_from(Refund)) or 0,
            "events": db.session.scalar(sa.select(sa.func.count()).select_from(GatewayEvent)) or 0,
            "emails": db.session.scalar(sa.select(sa.func.count()).select_from(OutboxMessage)) or 0,
        }
        db.session.remove()
    return counts


def print_what_the_ledgers_held() -> None:
    """For the record (pytest -s shows it): how much the property exercised."""
    totals = Counter[str]()
    for ledger in LEDGERS:
        totals.update(ledger)
    print(f"\nproperty: {len(LEDGERS)} examples, totals {dict(totals)}")


def check_ledger(app: Flask, *, recovered: bool) -> None:
    with app.app_context():
        orders = db.session.scalars(sa.select(Order)).all()
        charges = db.session.scalars(sa.select(GatewayCharge)).all()
        refunds = db.session.scalars(sa.select(Refund)).all()
        gateway_refunds = db.session.scalars(sa.select(GatewayRefund)).all()
        items = db.session.execute(sa.select(OrderItem.order_id, OrderItem.sku, OrderItem.quantity)).all()
        products = db.session.execute(
            sa.select(Product.sku, Product.stock, LabStock.seeded).join(LabStock, LabStock.sku == Product.sku)
        ).all()
        emails = db.session.execute(sa.select(OutboxMessage.kind, OutboxMessage.subject)).all()
        db.session.remove()

    # One order per key; at most one succeeded charge per order, exactly one once it is paid.
    per_key = Counter(o.idempotency_key for o in orders)
    assert all(count == 1 for count in per_key.values()), per_key
    succeeded = Counter(c.reference for c in charges if c.status == "succeeded")
    assert all(count == 1 for count in succeeded.values()), succeeded
    for order in orders:
        paid = order.status in PAID_STATES
        if paid or recovered:
            # Mid-flight a pending order may already have its charge (an answer was lost).
            assert paid == (succeeded[order.public_id] == 1), order.status
        else:
            assert order.status == "pending" or succeeded[order.public_id] == 0, order.status

    # Never more refunded than charged: the order's reservation is the sum of its refunds.
    asked: defaultdict[int, int] = defaultdict(int)
    for refund in refunds:
        asked[refund.order_id] += refund.amount_cents
    for order in orders:
        assert order.refunded_cents == asked[order.id] <= order.total_cents, order.public_id
        if order.refunded_cents:
            assert order.status == (REFUNDED if order.refunded_cents == order.total_cents else "partially_refunded")
    by_charge: defaultdict[str, int] = defaultdict(int)
    for given in gateway_refunds:
        by_charge[given.charge_id] += given.amount_cents
    for charge in charges:
        assert charge.refunded_cents == by_charge[charge.id] <= charge.amount_cents, charge.id
    # Each shop refund reaches the gateway at most once (its refund key), and is succeeded when it did.
    given_by_key = Counter(given.refund_key for given in gateway_refunds)
    assert set(given_by_key) <= {refund.refund_key for refund in refunds}
    for refund in refunds:
        assert given_by_key[refund.refund_key] <= 1
        if refund.status == REFUND_SUCCEEDED or recovered:
            assert refund.status == REFUND_SUCCEEDED and given_by_key[refund.refund_key] == 1, refund.public_id

    # The stock balances: seeded = left + what the orders that hold stock hold.
    held: Counter[str] = Counter()
    holding = {order.id for order in orders if order.status in HOLDS_STOCK}
    for order_id, sku, quantity in items:
        if order_id in holding:
            held[sku] += quantity
    for sku, stock, seeded in products:
        assert stock >= 0 and seeded == stock + held[sku], (sku, stock, seeded, held[sku])

    # One confirmation per paid order, one receipt per succeeded refund, none for anything else.
    written = Counter(emails)
    assert all(count == 1 for count in written.values())
    confirmed = {subject for kind, subject in emails if kind == ORDER_CONFIRMATION}
    assert confirmed == {order.public_id for order in orders if order.status in PAID_STATES}
    receipts = {subject for kind, subject in emails if kind == REFUND_RECEIPT}
    assert receipts == {refund.public_id for refund in refunds if refund.status == REFUND_SUCCEEDED}
