"""``Prefer: respond-async`` (RFC 7240) on POST /api/orders and POST /api/payments: where the answer would be
409 (in progress) or 503 (outcome unknown), it is 202 Accepted with the Location of the order or payment,
Retry-After and Preference-Applied; that resource shows ``pending`` until the outcome, then the final one."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout.audit import IdempotencyRecord
from checkout.extensions import db
from tests.conftest import LiveServer
from tests.helpers import (
    ALICE,
    GOOD_CARD,
    UNAVAILABLE_CARD,
    VERY_SLOW_CARD,
    Ledger,
    age_every_record,
    charge_as_its_holder,
    claim_as_a_dying_worker,
    duplicates_of_a_slow_order,
    order_body,
    post_order,
    signed_post,
    wait_for,
)
from tests.http import send
from tests.payments import claim_payment_as_a_dying_worker, new_key, payment_body, payments_of, post_payment

ASYNC = {"Prefer": "respond-async"}


def _polled_until_final(client: FlaskClient, location: str) -> dict[str, Any]:
    """What a client told 202 does: GET the Location until it is no longer pending (bounded by wait_for)."""
    return wait_for(lambda: (shown := client.get(location, headers=ALICE).get_json())["status"] != "pending" and shown)


def test_an_order_whose_outcome_is_unknown_is_202_with_its_location_instead_of_503(
    client: FlaskClient, ledger: Ledger
) -> None:
    """The gateway was down: 202, and the process that answered carries the order on (the gateway takes it at the
    second try), so polling the Location ends on paid with no retry; a retry then gets the stored 201."""
    key = str(uuid.uuid4())
    accepted = post_order(client, key, order_body(card=UNAVAILABLE_CARD), headers=ASYNC)
    assert accepted.status_code == 202
    assert accepted.headers["Preference-Applied"] == "respond-async"
    assert int(accepted.headers["Retry-After"]) >= 1
    [order] = ledger.orders()
    assert accepted.headers["Location"] == f"/api/orders/{order.public_id}"
    assert accepted.get_json()["status"] == "pending" and accepted.get_json()["id"] == order.public_id
    assert _polled_until_final(client, accepted.headers["Location"])["status"] == "paid"
    done = post_order(client, key, order_body(card=UNAVAILABLE_CARD), headers=ASYNC)
    assert done.status_code == 201 and done.headers["Idempotent-Replayed"] == "true"
    assert "Preference-Applied" not in done.headers  # a final answer needs no async
    assert len(ledger.succeeded_charges()) == 1 and "resumed" in ledger.events()


def test_without_the_preference_the_unknown_outcome_is_still_503(client: FlaskClient) -> None:
    assert post_order(client, str(uuid.uuid4()), order_body(card=UNAVAILABLE_CARD)).status_code == 503


def test_a_duplicate_of_an_order_in_progress_is_202_with_its_location_instead_of_409(
    live_server: LiveServer, ledger: Ledger
) -> None:
    first, [duplicate] = duplicates_of_a_slow_order(live_server.url, ledger, ASYNC)
    assert duplicate.status == 202
    assert duplicate.headers["Preference-Applied"] == "respond-async"
    assert int(duplicate.headers["Retry-After"]) >= 1
    order_id = json.loads(first.body)["id"]
    assert duplicate.headers["Location"] == f"/api/orders/{order_id}"
    assert json.loads(duplicate.body)["status"] == "pending"
    after = send("GET", f"{live_server.url}{duplicate.headers['Location']}", headers=ALICE)
    assert json.loads(after.body)["status"] == "paid"
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


def test_a_payment_whose_outcome_is_unknown_is_202_with_its_location_then_succeeds_once(
    client: FlaskClient, ledger: Ledger
) -> None:
    key, body = new_key(), payment_body(card=UNAVAILABLE_CARD)
    accepted = post_payment(client, key, body, headers=ASYNC)
    assert accepted.status_code == 202 and accepted.headers["Preference-Applied"] == "respond-async"
    location = accepted.headers["Location"]
    assert location.startswith("/api/payments/pay_") and accepted.get_json()["status"] == "pending"
    shown = _polled_until_final(client, location)  # carried on by the process that answered 202
    [charge] = ledger.succeeded_charges()
    assert (shown["status"], shown["charge_id"]) == ("succeeded", charge.id)
    [record] = ledger.records()
    assert (record.state, record.response_status) == ("completed", 201)  # its answer is stored under the key
    retry = post_payment(client, key, body, headers=ASYNC)
    assert retry.status_code == 201 and retry.headers["Idempotent-Replayed"] == "true"
    assert len(ledger.charges()) == 1


def test_a_second_key_while_another_pays_the_same_order_is_202_with_that_payments_location(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    body, first_key, second_key = payment_body(card=VERY_SLOW_CARD), new_key(), new_key()
    claim_payment_as_a_dying_worker(app, first_key, body, lease_seconds=60)  # pending, its worker at the gateway
    accepted = post_payment(client, second_key, {**body, "card_number": GOOD_CARD}, headers={**ALICE, **ASYNC})
    assert accepted.status_code == 202 and accepted.headers["Preference-Applied"] == "respond-async"
    [pending] = payments_of(ledger)
    assert accepted.headers["Location"] == f"/api/payments/{pending.public_id}"
    assert accepted.get_json()["status"] == "pending" and accepted.get_json()["id"] == pending.public_id
    assert 1 <= int(accepted.headers["Retry-After"]) <= 60  # the other key's call must have ended by its lease
    assert len(ledger.records()) == 1 and ledger.charges() == []  # nothing stored or charged under the second key
    listed = client.get("/api/lab/requests", query_string={"key": second_key}).get_json()
    assert [(r["status"], r["replayed"]) for r in listed] == [(202, False)]


def test_a_retry_whose_record_was_lost_while_its_payment_is_pending_is_202_with_its_location(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    body, key = payment_body(card=VERY_SLOW_CARD), new_key()
    claim_payment_as_a_dying_worker(app, key, body, lease_seconds=60)  # pending, its worker at the gateway
    with app.app_context():  # the record is gone (deleted by hand): only the payments' unique (customer, key) is left
        db.session.execute(sa.delete(IdempotencyRecord).where(IdempotencyRecord.key == key))
        db.session.commit()
    assert post_payment(client, key, body).status_code == 409  # without the preference: in progress
    accepted = post_payment(client, key, body, headers={**ALICE, **ASYNC})
    [pending] = payments_of(ledger)
    assert (accepted.status_code, accepted.headers["Location"]) == (202, f"/api/payments/{pending.public_id}")
    assert accepted.get_json()["status"] == "pending" and ledger.charges() == []


def test_the_api_description_documents_the_202_of_orders_and_payments(client: FlaskClient) -> None:
    paths = client.get("/api/openapi.json").get_json()["paths"]
    for path in ("/api/orders", "/api/payments"):
        accepted = paths[path]["post"]["responses"]["202"]
        assert set(accepted["headers"]) == {"Location", "Retry-After", "Preference-Applied"}


def _charged_by_the_holder_then_paid_by_its_webhook(
    app: Flask, client: FlaskClient, reference: str, key: str, amount: tuple[int, str]
) -> None:
    """What the very slow card does: the gateway charges halfway through the holder's call, and its webhook
    pays the order (or payment) while the holder still waits for its answer, its key still in progress."""
    charge_id = charge_as_its_holder(app, reference, key, amount)
    event = {"id": f"evt_{uuid.uuid4().hex[:8]}", "type": "charge.succeeded", "created": 0,
             "data": {"id": charge_id, "reference": reference}}  # fmt: skip
    assert signed_post(client, event).get_json()["result"] == "applied"


def test_a_key_still_held_for_an_order_already_paid_answers_the_paid_order_not_409_or_202(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    claim_as_a_dying_worker(app, key, lease_seconds=60)  # the holder is at the gateway, its lease live
    [order] = ledger.orders()
    _charged_by_the_holder_then_paid_by_its_webhook(
        app, client, order.public_id, order.gateway_key, (order.total_cents, order.currency)
    )
    for prefer in ({}, {"Prefer": "respond-async"}, {"Prefer": "wait=1"}):
        answer = post_order(client, key, order_body(), headers=prefer)
        assert answer.status_code == 201, (prefer, answer.get_json())
        assert answer.headers["Idempotent-Replayed"] == "true" and answer.get_json()["status"] == "paid"
        assert answer.get_json()["id"] == order.public_id
    [record] = ledger.records()
    assert record.state == "in_progress"  # the holder's: it stores its own answer when the gateway's comes back
    assert len(ledger.succeeded_charges()) == 1


def test_a_payment_key_still_held_for_a_payment_already_succeeded_answers_it_not_409_or_202(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    key, body = new_key(), payment_body(GOOD_CARD)
    claim_payment_as_a_dying_worker(app, key, body, lease_seconds=60)
    [payment] = payments_of(ledger)
    _charged_by_the_holder_then_paid_by_its_webhook(
        app, client, payment.public_id, payment.gateway_key, (payment.amount, payment.currency)
    )
    for prefer in ({}, {"Prefer": "respond-async"}):
        answer = post_payment(client, key, body, headers=prefer)
        assert answer.status_code == 201, (prefer, answer.get_json())
        assert answer.headers["Idempotent-Replayed"] == "true" and answer.get_json()["status"] == "succeeded"
    assert len(ledger.succeeded_charges()) == 1


def test_a_duplicate_waiting_on_a_held_key_wakes_when_a_webhook_pays_its_order(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    """``Prefer: wait`` ends when the order is final, not when the holder's own answer comes back (here never:
    the holder hangs at the gateway with a long lease, and the wait asked for is longer than the test)."""
    app.config["IDEMPOTENCY_MAX_WAIT_SECONDS"] = 60
    key = str(uuid.uuid4())
    claim_as_a_dying_worker(app, key, lease_seconds=600)
    [order] = ledger.orders()
    answers: list[Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(post_order(app.test_client(), key, order_body(), headers={"Prefer": "wait=60"})),
        daemon=True,  # if it never wakes, it is not left to hold up the run
    )
    waiting.start()
    wait_for(lambda: "conflict" in ledger.events())  # the duplicate has looked once and waits
    _charged_by_the_holder_then_paid_by_its_webhook(
        app, client, order.public_id, order.gateway_key, (order.total_cents, order.currency)
    )
    waiting.join(timeout=30)
    assert not waiting.is_alive(), "the duplicate still waits for an order already paid"
    [answer] = answers
    assert answer.status_code == 201 and answer.get_json()["status"] == "paid"
    assert answer.headers["Idempotent-Replayed"] == "true"
    assert len(ledger.succeeded_charges()) == 1


# --- a 202 is carried to its outcome by the process that answered it, with no retry and no cron ------------------


def test_a_202_duplicate_carries_on_the_order_of_a_holder_that_died(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    """The duplicate holds the same body (its fingerprint says so), card and all: once the dead holder's lease
    runs out, the process that answered the duplicate 202 takes the order over and pays it."""
    key = str(uuid.uuid4())
    claim_as_a_dying_worker(app, key, lease_seconds=60)  # it made the order, then died before the gateway
    accepted = post_order(client, key, order_body(), headers=ASYNC)
    assert accepted.status_code == 202
    age_every_record(app)  # the dead holder's lease runs out
    assert _polled_until_final(client, accepted.headers["Location"])["status"] == "paid"
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
    assert "resumed" in ledger.events()


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_CARRIERS": "0"}])
def test_a_shop_that_carries_nothing_on_answers_its_own_unknown_outcome_503_not_202(
    client: FlaskClient, ledger: Ledger
) -> None:
    """A 202 promises that the outcome comes without a retry: where nobody would carry it on, the client is told
    to retry instead (CHECKOUT_CARRIERS=0, or every carrier of the worker busy)."""
    answer = post_payment(client, new_key(), payment_body(card=UNAVAILABLE_CARD), headers=ASYNC)
    assert answer.status_code == 503 and "Preference-Applied" not in answer.headers
    assert ledger.charges() == []
