"""Gateway faults, lost answers, expired leases and reconcile: still one order, one charge."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.audit import IdempotencyRecord
from checkout.database import utcnow, writing
from checkout.extensions import db, once
from checkout.idempotency import (
    STARTED,
    LeaseLost,
    MoveTo,
    Operation,
    Phase,
    Refuse,
    Refused,
    Scope,
    Settings,
    StoredResponse,
)
from checkout.idempotency.engine import Asked, begin, run, take_over
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    GOOD_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    abandoned_unpaid_order,
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
    reconcile_the_abandoned,
)


def test_gateway_unavailable_is_503_nothing_stored_and_the_retry_resumes(client: FlaskClient, ledger: Ledger) -> None:
    key = str(uuid.uuid4())
    first = post_order(client, key, order_body(card=UNAVAILABLE_CARD))
    assert first.status_code == 503
    assert first.headers["Retry-After"] == "1"
    assert first.mimetype == "application/problem+json"
    [record] = ledger.records()
    assert progress_of(record) == ("in_progress", "order_created", None, None)
    assert ledger.charges() == []
    retry = post_order(client, key, order_body(card=UNAVAILABLE_CARD))  # no waiting: the lease was released at once
    assert retry.status_code == 201
    assert "Idempotent-Replayed" not in retry.headers
    [order] = ledger.orders()
    assert order.status == "paid"
    assert len(ledger.succeeded_charges()) == 1
    assert "resumed" in ledger.events()


def test_a_lost_gateway_answer_is_503_and_the_retry_finds_the_charge_instead_of_charging_again(
    client: FlaskClient, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    first = post_order(client, key, order_body(card=ANSWER_LOST_CARD))
    assert first.status_code == 503
    [charge] = ledger.charges()  # the gateway did charge
    assert [o.status for o in ledger.orders()] == ["pending"]
    retry = post_order(client, key, order_body(card=ANSWER_LOST_CARD))
    assert retry.status_code == 201
    assert retry.get_json()["charge_id"] == charge.id
    assert len(ledger.charges()) == 1
    assert [o.status for o in ledger.orders()] == ["paid"]
    assert post_order(client, key, order_body(card=ANSWER_LOST_CARD)).get_data() == retry.get_data()


def test_a_retry_after_the_lease_expires_takes_over_and_finishes(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    first = post_order(client, key, order_body(card=ANSWER_LOST_CARD))
    assert first.status_code == 503
    with app.app_context():  # as if the worker had died holding the lease, not released it
        db.session.execute(
            sa.update(IdempotencyRecord).values(locked_by="dead-worker", locked_until=utcnow() + timedelta(seconds=60))
        )
        db.session.commit()
    assert post_order(client, key, order_body(card=ANSWER_LOST_CARD)).status_code == 409
    age_every_record(app)
    assert post_order(client, key, order_body(card=ANSWER_LOST_CARD)).status_code == 201
    assert len(ledger.succeeded_charges()) == 1
    assert [o.status for o in ledger.orders()] == ["paid"]


# An operation of no particular kind: its first phase moves to "step_one" and does nothing else.
STEP_ONE = {STARTED: Phase(commit=lambda _operation, _nothing: MoveTo("step_one"))}


def test_a_worker_whose_lease_was_taken_over_cannot_write(app: Flask) -> None:
    scope = Scope("cus_x", "POST /api/orders", "lease-test-key-0001")
    settings = Settings(lease_seconds=60)
    with app.app_context():
        first = begin(Asked(once.store, scope, "f" * 64, STEP_ONE, settings))
        with writing() as tx:
            tx.execute(sa.update(IdempotencyRecord).values(locked_until=utcnow() - timedelta(seconds=1)))
        second = begin(Asked(once.store, scope, "f" * 64, STEP_ONE, settings))
        assert isinstance(first, Operation) and isinstance(second, Operation) and second.resumed
        with pytest.raises(LeaseLost), first.owned():
            first.apply(MoveTo("step_two"))
        [record] = db.session.scalars(sa.select(IdempotencyRecord)).all()
        assert (record.recovery_point, record.locked_by) == ("step_one", second.owner)
        with second.owned():
            second.apply(MoveTo("step_two"))


def test_of_many_retries_racing_for_an_expired_lease_exactly_one_takes_it_over(app: Flask) -> None:
    scope = Scope("cus_x", "POST /api/orders", "takeover-race-0001")
    settings = Settings(lease_seconds=60)
    with app.app_context():
        begin(Asked(once.store, scope, "f" * 64, STEP_ONE, settings))
        with writing() as tx:
            tx.execute(sa.update(IdempotencyRecord).values(locked_until=utcnow() - timedelta(seconds=1)))
        record = once.store.find(scope)
        db.session.remove()
    assert record is not None
    barrier = threading.Barrier(8)
    winners: list[object] = []

    def retry() -> None:
        with app.app_context():
            barrier.wait()
            operation = take_over(once.store, record, settings)
            if operation is not None:
                winners.append(operation)
            db.session.remove()

    threads = [threading.Thread(target=retry) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(winners) == 1


def test_reconcile_completes_an_abandoned_payment_that_the_gateway_charged(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    assert post_order(client, key, order_body(card=ANSWER_LOST_CARD)).status_code == 503  # the client never comes back
    output = reconcile_the_abandoned(app, runner)
    assert "paid" in output and "reconciled 1" in output
    [order] = ledger.orders()
    assert order.status == "paid" and len(ledger.succeeded_charges()) == 1
    [record] = ledger.records()
    assert (record.state, record.response_status) == ("completed", 201)
    late = post_order(client, key, order_body(card=ANSWER_LOST_CARD))
    assert late.status_code == 201 and late.headers["Idempotent-Replayed"] == "true"
    assert late.get_json()["id"] == order.public_id


def test_reconcile_ends_an_abandoned_unpaid_payment_and_the_client_sees_it(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    key = abandoned_unpaid_order(app, client, runner)
    assert [o.status for o in ledger.orders()] == ["failed"]
    assert [c.status for c in ledger.charges()] == ["voided"]  # the fence reconcile put on the gateway key
    late = post_order(client, key, order_body(card=UNAVAILABLE_CARD))
    assert late.status_code == 402
    assert late.get_json()["type"] == "payment-abandoned"


def test_a_tab_left_on_an_abandoned_payment_paid_with_another_card_is_offered_the_cart_again(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    """Exercise 5's tab: its worker gone, reconcile ended its payment; the old form, paid with another card, is
    told that payment never completed (not 422, another form under a used key), and a new key pays once."""
    add_to_cart(client)
    fields = {**checkout_fields(client), "email": "shopper@example.com"}
    assert client.post("/checkout", data={**fields, "card_number": UNAVAILABLE_CARD}).status_code == 503
    assert "failed" in reconcile_the_abandoned(app, runner)

    stale = client.post("/checkout", data={**fields, "card_number": GOOD_CARD})
    assert stale.status_code == 402
    assert "never completed, and nothing was charged" in stale.get_data(as_text=True)
    assert [o.status for o in ledger.orders()] == ["failed"] and ledger.succeeded_charges() == []
    fresh = checkout_fields(client)
    assert fresh["idempotency_key"] != fields["idempotency_key"]
    paid = client.post("/checkout", data={**fresh, "email": "shopper@example.com", "card_number": GOOD_CARD})
    assert paid.status_code == 303
    assert sorted(o.status for o in ledger.orders()) == ["failed", "paid"] and len(ledger.succeeded_charges()) == 1


def test_reconcile_restarts_an_operation_that_created_nothing(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    with app.app_context():  # a claim whose first phase made nothing the gateway could have charged
        begin(Asked(once.store, Scope("cus_demo_alice", "POST /api/orders", key), "f" * 64, STEP_ONE, Settings()))
        db.session.remove()
    assert "restarted" in reconcile_the_abandoned(app, runner)
    assert ledger.records() == [] and ledger.orders() == []
    assert post_order(client, key).status_code == 201
    assert len(ledger.succeeded_charges()) == 1


def test_a_crash_inside_the_claims_transaction_leaves_no_record_and_no_order(app: Flask, ledger: Ledger) -> None:
    def crash(_operation: object, _nothing: None) -> MoveTo:
        raise RuntimeError("the worker died in the middle of its first phase")

    with app.app_context(), pytest.raises(RuntimeError):
        begin(
            Asked(
                once.store,
                Scope("cus_x", "POST /api/orders", "crash-key-000000001"),
                "f" * 64,
                {STARTED: Phase(commit=crash)},
                Settings(),
            )
        )
    assert ledger.records() == [] and ledger.orders() == [] and ledger.events() == []


def test_reconcile_leaves_live_operations_alone(app: Flask, runner: FlaskCliRunner, ledger: Ledger) -> None:
    claim_as_a_dying_worker(app, "live-operation-0001")  # its lease has not run out
    assert "reconciled 0" in runner.invoke(args=["idempotency", "reconcile"]).output
    assert [r.state for r in ledger.records()] == ["in_progress"]


def test_in_the_browser_a_lost_gateway_answer_shows_try_again_with_the_same_key(
    client: FlaskClient, ledger: Ledger
) -> None:
    fields = checkout_with_a_mug(client)
    first = pay_in_browser(client, fields, card=ANSWER_LOST_CARD, email="s@example.com")
    assert first.status_code == 503
    page = first.get_data(as_text=True)
    assert "could not confirm your payment" in page
    again = form_fields(page)
    assert again["idempotency_key"] == fields["idempotency_key"]
    assert again["card_number"] == ""  # never echoed: the shopper types it again
    second = client.post("/checkout", data={**again, "card_number": ANSWER_LOST_CARD})
    assert second.status_code == 303
    [order] = ledger.orders()
    assert order.status == "paid" and len(ledger.charges()) == 1


def test_an_unreachable_database_is_a_503_page_or_problem_not_a_trace() -> None:
    from checkout import create_app

    app = create_app(
        {
            "SECRET_KEY": "k",
            "SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://postgres@127.0.0.1:9/none?connect_timeout=2",
        }
    )
    client = app.test_client()
    page = client.get("/")
    assert page.status_code == 503
    assert "Traceback" not in page.get_data(as_text=True)
    api = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": str(uuid.uuid4())})
    assert api.status_code == 503
    assert api.mimetype == "application/problem+json"
    assert api.headers["Retry-After"]


def test_a_later_phase_that_refuses_before_making_anything_leaves_the_key_usable(app: Flask, ledger: Ledger) -> None:
    """Refuse after the first phase (a payment whose order another key holds again, after fencing a dead one): the
    record is deleted, nothing is stored, and the same key can run again."""
    busy = StoredResponse.json(409, {"type": "order-payment-in-progress"}, **{"Retry-After": "2"})

    def refuse(_operation: object, _nothing: None) -> MoveTo:
        raise Refuse(busy, reference="pay_other")

    phases = {STARTED: Phase(commit=lambda _op, _n: MoveTo("fencing")), "fencing": Phase(commit=refuse)}
    asked = Asked(once.store, Scope("cus_x", "POST /api/payments", "refused-later-0001"), "f" * 64, phases, Settings())
    with app.app_context():
        outcome = run(asked)
        assert isinstance(outcome, Refused) and (outcome.response, outcome.reference) == (busy, "pay_other")
        assert ledger.records() == [] and "discarded" in ledger.events()
        again = begin(Asked(once.store, asked.scope, "f" * 64, {STARTED: Phase(commit=lambda _o, _n: MoveTo("x"))},
                            Settings()))  # fmt: skip
        assert isinstance(again, Operation) and not again.resumed  # claimed afresh
