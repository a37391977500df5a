"""The spec's invariants as a property: random sequences of requests, retries,
mismatches, fault cards, crashed workers, lease expiries and reconcile runs on
a handful of keys (two at once, too); after every step, no key has two orders or two charges,
replays are byte-identical, and a paid order has exactly one charge."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import sqlalchemy as sa
from flask import Flask
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from checkout.extensions import db
from checkout.gateway import GatewayCharge
from checkout.shop.models import Order
from checkout.shop.reconcile import reconcile
from checkout.shop.runtime import gateway, idempotency_settings
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


def test_no_sequence_of_retries_faults_and_crashes_charges_twice(app: Flask) -> None:
    client = app.test_client()

    class Checkout(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            with app.app_context():  # each example starts from an empty ledger (products and customers stay)
                for table in (
                    "order_items",
                    "orders",
                    "gateway_charges",
                    "gateway_fault_marks",
                    "idempotency_records",
                    "idempotency_events",
                ):
                    db.session.execute(db.metadata.tables[table].delete())
                db.session.commit()
                db.session.remove()
            prefix = uuid.uuid4().hex[:8]
            self.keys = [f"{prefix}-property-key-{i}" for i in range(KEYS)]
            self.cards: dict[str, str] = {}
            self.final: dict[str, tuple[int, bytes]] = {}  # the first final answer per key

        def body(self, key: str, mismatch: bool) -> dict:
            return order_body(card=self.cards[key], email="other@example.com" if mismatch else "alice@example.com")

        @rule(index=st.integers(0, KEYS - 1), card=st.sampled_from(CARDS), mismatch=st.booleans())
        def send(self, index: int, card: str, mismatch: bool) -> None:
            key = self.keys[index]
            self.cards.setdefault(key, card)
            mismatch = mismatch and key in self.final
            response = client.post(
                "/api/orders", json=self.body(key, mismatch), headers={**ALICE, "Idempotency-Key": key}
            )
            self.check(key, mismatch, response)

        @rule(index=st.integers(0, KEYS - 1), card=st.sampled_from(CARDS))
        def two_duplicates_race(self, index: int, card: str) -> None:
            key = self.keys[index]
            self.cards.setdefault(key, card)
            body = self.body(key, False)
            responses = race(
                2,
                lambda _i: app.test_client().post("/api/orders", json=body, headers={**ALICE, "Idempotency-Key": key}),
            )
            for response in responses:
                assert response.status_code in (201, 402, 409, 503), response.status_code
                if response.status_code in (409, 503):  # lost the race, or the gateway failed first
                    continue
                self.check(key, False, response)

        def check(self, key: str, mismatch: bool, response: Any) -> None:
            assert response.status_code < 500 or response.status_code == 503
            if mismatch:
                assert response.status_code == 422
                assert response.get_json()["type"] == "idempotency-key-reused"
                return
            if response.status_code in (201, 402):
                answer = (response.status_code, response.get_data())
                if key in self.final:
                    assert answer == self.final[key], "a replay differs from the first answer"
                self.final.setdefault(key, answer)
            else:
                assert response.status_code in (409, 503), response.status_code
                assert key not in self.final

        @rule(index=st.integers(0, KEYS - 1), card=st.sampled_from(CARDS))
        def a_worker_claims_and_dies(self, index: int, card: str) -> None:
            key = self.keys[index]
            self.cards.setdefault(key, card)
            claim_as_a_dying_worker(app, key, self.body(key, False))

        @rule()
        def leases_expire(self) -> None:
            age_every_record(app)

        @rule()
        def reconcile_runs(self) -> None:
            with app.app_context():
                for result in reconcile(gateway(), idempotency_settings()):
                    if result.outcome in ("paid", "declined", "failed"):
                        self.final.pop(result.key, None)  # its stored answer is now the reconciled one
                db.session.remove()

        @invariant()
        def one_order_and_at_most_one_charge_per_key(self) -> None:
            check_ledger(app, recovered=False)

        def teardown(self) -> None:
            # Recover whatever was left mid-flight; then paid <=> exactly one succeeded charge.
            age_every_record(app)
            with app.app_context():
                reconcile(gateway(), idempotency_settings())
                db.session.remove()
            check_ledger(app, recovered=True)

    run_state_machine_as_test(
        Checkout,
        settings=settings(
            max_examples=25,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )


def check_ledger(app: Flask, *, recovered: bool) -> None:
    with app.app_context():
        orders = db.session.scalars(sa.select(Order)).all()
        charges = db.session.scalars(sa.select(GatewayCharge)).all()
        db.session.remove()
    per_key = Counter(o.idempotency_key for o in orders)
    assert all(count == 1 for count in per_key.values()), per_key
    succeeded = Counter(c.reference for c in charges if c.status == "succeeded")
    assert all(count == 1 for count in succeeded.values()), succeeded
    for order in orders:
        if order.status == "paid" or recovered:
            # Mid-flight a pending order may already have its charge (an answer was lost).
            assert (order.status == "paid") == (succeeded[order.public_id] == 1), order.status
        else:
            assert order.status == "pending" or succeeded[order.public_id] == 0, order.status
