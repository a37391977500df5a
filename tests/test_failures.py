"""Gateway faults, lost answers, expired leases and reconcile: still one order, one charge."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.database import utcnow
from checkout.extensions import db
from checkout.idempotency import IdempotencyRecord, LeaseLost, Scope, Settings, claim, take_over
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    add_to_cart,
    age_every_record,
    checkout_fields,
    claim_as_a_dying_worker,
    form_fields,
    order_body,
    post_order,
)


def test_gateway_unavailable_is_503_nothing_stored_and_the_retry_resumes(client: FlaskClient, ledger: Ledger) -> None:
    key = str(uuid.uuid4())
    first = post_order(client, key, order_body(card=UNAVAILABLE_CARD))
    assert first.status_code == 503
    assert first.headers["Retry-After"] == "1"
    assert first.mimetype == "application/problem+json"
    [record] = ledger.records()
    assert (record.state, record.recovery_point, record.locked_by, record.response_status) == (
        "in_progress",
        "charge_attempted",
        None,
        None,
    )
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


def test_a_worker_whose_lease_was_taken_over_cannot_write(app: Flask) -> None:
    scope = Scope("cus_x", "POST /api/orders", "lease-test-key-0001")
    settings = Settings(lease_seconds=60)
    with app.app_context():
        first = claim(scope, "f" * 64, settings)
        db.session.execute(sa.update(IdempotencyRecord).values(locked_until=utcnow() - timedelta(seconds=1)))
        db.session.commit()
        second = claim(scope, "f" * 64, settings)
        assert second is not first and getattr(second, "resumed", False)
        with pytest.raises(LeaseLost), first.phase():
            first.checkpoint("order_created")
        [record] = db.session.scalars(sa.select(IdempotencyRecord)).all()
        assert (record.recovery_point, record.locked_by) == ("started", second.owner)
        with second.phase():
            second.checkpoint("order_created")
        db.session.commit()


def test_of_many_retries_racing_for_an_expired_lease_exactly_one_takes_it_over(app: Flask) -> None:
    scope = Scope("cus_x", "POST /api/orders", "takeover-race-0001")
    settings = Settings(lease_seconds=60)
    with app.app_context():
        claim(scope, "f" * 64, settings)
        db.session.execute(sa.update(IdempotencyRecord).values(locked_until=utcnow() - timedelta(seconds=1)))
        db.session.commit()
        record = db.session.scalars(sa.select(IdempotencyRecord)).one()
        db.session.commit()
    barrier = threading.Barrier(8)
    winners: list[object] = []

    def retry() -> None:
        with app.app_context():
            barrier.wait()
            operation = take_over(record, settings)
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
    age_every_record(app)
    result = runner.invoke(args=["idempotency", "reconcile"])
    assert "paid" in result.output and "reconciled 1" in result.output
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
    key = str(uuid.uuid4())
    assert post_order(client, key, order_body(card=UNAVAILABLE_CARD)).status_code == 503
    age_every_record(app)
    assert "failed" in runner.invoke(args=["idempotency", "reconcile"]).output
    assert [o.status for o in ledger.orders()] == ["failed"]
    assert ledger.charges() == []
    late = post_order(client, key, order_body(card=UNAVAILABLE_CARD))
    assert late.status_code == 402
    assert late.get_json()["type"] == "payment-abandoned"


def test_reconcile_restarts_an_operation_abandoned_before_its_order_existed(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    claim_as_a_dying_worker(app, key)  # a worker claimed the key and died at once
    age_every_record(app)
    assert "restarted" in runner.invoke(args=["idempotency", "reconcile"]).output
    assert ledger.records() == [] and ledger.orders() == []
    assert post_order(client, key).status_code == 201
    assert len(ledger.succeeded_charges()) == 1


def test_reconcile_leaves_live_operations_alone(app: Flask, runner: FlaskCliRunner, ledger: Ledger) -> None:
    claim_as_a_dying_worker(app, "live-operation-0001")  # its lease has not run out
    assert "reconciled 0" in runner.invoke(args=["idempotency", "reconcile"]).output
    assert [r.state for r in ledger.records()] == ["in_progress"]


def test_in_the_browser_a_lost_gateway_answer_shows_try_again_with_the_same_key(
    client: FlaskClient, ledger: Ledger
) -> None:
    add_to_cart(client)
    fields = checkout_fields(client)
    first = client.post("/checkout", data={**fields, "email": "s@example.com", "card_number": ANSWER_LOST_CARD})
    assert first.status_code == 503
    page = first.get_data(as_text=True)
    assert "could not confirm your payment" in page
    again = form_fields(page)
    assert again["idempotency_key"] == fields["idempotency_key"]
    second = client.post("/checkout", data=again)
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
