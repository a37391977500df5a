"""POST /api/payments, the articles' own request: every row of the spec's idempotency table, one
succeeded payment per (customer, orderId), the fault cards, the webhook and reconcile."""

from __future__ import annotations

import json
import uuid

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate
from prometheus_client import REGISTRY

from checkout.audit import IdempotencyEvent
from checkout.extensions import db, once
from checkout.idempotency import STARTED, MoveTo, Operation, Phase, Scope, Settings
from checkout.idempotency.engine import Asked, begin
from checkout.shop.models import Payment
from checkout.shop.payments import API_PAYMENTS
from tests.conftest import LiveServer
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    BOB,
    DECLINED_CARD,
    GOOD_CARD,
    SLOW_CARD,
    UNAVAILABLE_CARD,
    VERY_SLOW_CARD,
    Ledger,
    SameInstantLooks,
    age_every_record,
    charge_as_its_holder,
    duplicates_in_progress,
    event_of,
    order_body,
    post_order,
    race,
    reconcile_the_abandoned,
    signed_post,
    stored_for_the_key,
    table_counts,
)
from tests.http import Reply, post_json, raw_request
from tests.payments import claim_payment_as_a_dying_worker, new_key, payment_body, payments_of, post_payment

# --- the first answer and its replay ---------------------------------------------------------


def test_first_success_is_201_with_location_and_the_payment(client: FlaskClient, ledger: Ledger) -> None:
    body = payment_body(orderId="order-123")
    response = post_payment(client, new_key(), body)
    assert response.status_code == 201
    payment = response.get_json()
    assert response.headers["Location"] == f"/api/payments/{payment['id']}"
    assert payment["id"].startswith("pay_")
    assert set(payment) == {"id", "order_id", "amount", "currency", "status", "charge_id", "created_at"}
    assert (payment["order_id"], payment["amount"], payment["currency"], payment["status"]) == (
        "order-123",
        49900,
        "UAH",
        "succeeded",
    )
    assert "Idempotent-Replayed" not in response.headers
    [charge] = ledger.succeeded_charges()
    assert (charge.id, charge.reference, charge.amount_cents, charge.currency) == (
        payment["charge_id"],
        payment["id"],
        49900,
        "UAH",
    )
    assert charge.card_last4 == "4242"  # no card in the body: the success test card
    [record] = ledger.records()
    assert (record.endpoint, record.state, record.response_status) == (API_PAYMENTS, "completed", 201)


def test_replay_returns_the_stored_status_and_byte_identical_body(client: FlaskClient, ledger: Ledger) -> None:
    key, body = new_key(), payment_body()
    first = post_payment(client, key, body)
    again = post_payment(client, key, body)
    assert again.status_code == 201
    assert again.get_data() == first.get_data()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["Location"] == first.headers["Location"]
    assert len(payments_of(ledger)) == 1 and len(ledger.charges()) == 1


def test_the_default_card_and_the_same_card_spelled_out_are_the_same_request(
    client: FlaskClient, ledger: Ledger
) -> None:
    key, body = new_key(), payment_body()
    first = post_payment(client, key, body)
    again = post_payment(client, key, {**body, "card_number": "4242-4242-4242-4242"})  # normalized: the same
    assert again.headers["Idempotent-Replayed"] == "true" and again.get_data() == first.get_data()
    assert len(ledger.charges()) == 1


def test_a_payment_is_read_back_by_its_customer(client: FlaskClient) -> None:
    created = post_payment(client, new_key(), payment_body())
    read = client.get(created.headers["Location"], headers=ALICE)
    assert read.status_code == 200 and read.mimetype == "application/json"
    assert read.get_json() == created.get_json()


# --- the key in progress -----------------------------------------------------------------------


def test_same_key_still_in_progress_is_409_with_retry_after(app: Flask, client: FlaskClient, ledger: Ledger) -> None:
    key, body = new_key(), payment_body()
    assert isinstance(claim_payment_as_a_dying_worker(app, key, body, lease_seconds=60), Operation)
    response = post_payment(client, key, body)
    assert response.status_code == 409
    assert int(response.headers["Retry-After"]) >= 1
    assert response.mimetype == "application/problem+json"
    [payment] = payments_of(ledger)  # the other worker's first phase made it; nothing was charged
    problem = response.get_json()
    assert problem["type"] == "idempotency-request-in-progress"
    assert (problem["idempotency_key"], problem["payment_id"]) == (key, payment.public_id)
    assert payment.status == "pending" and ledger.charges() == []
    [record] = ledger.records()
    assert record.state == "in_progress" and record.response_status is None


def duplicates_of_a_slow_payment(
    live_server: LiveServer, ledger: Ledger, *duplicates: dict[str, str]
) -> tuple[Reply, list[Reply]]:
    """A slow-card payment and its ``duplicates``, sent once it has claimed its key and made its payment."""
    url = f"{live_server.url}/api/payments"
    return duplicates_in_progress(url, payment_body(card=SLOW_CARD), lambda: payments_of(ledger), *duplicates)


@pytest.mark.slow
def test_a_duplicate_of_a_slow_payment_is_409_with_retry_after_and_one_charge(
    live_server: LiveServer, ledger: Ledger
) -> None:
    original, [duplicate] = duplicates_of_a_slow_payment(live_server, ledger, {})
    assert duplicate.status == 409
    assert int(duplicate.headers["Retry-After"]) >= 1
    assert duplicate.json()["payment_id"] == original.json()["id"]
    assert original.status == 201
    assert len(ledger.succeeded_charges()) == 1


@pytest.mark.slow
def test_prefer_wait_waits_for_the_key_in_progress_and_answers_its_outcome(
    live_server: LiveServer, ledger: Ledger
) -> None:
    original, [waited] = duplicates_of_a_slow_payment(live_server, ledger, {"Prefer": "wait=10"})
    assert original.status == waited.status == 201
    assert waited.body == original.body
    assert waited.headers["Idempotent-Replayed"] == "true"
    assert waited.headers["Preference-Applied"] == "wait=10"
    assert len(ledger.succeeded_charges()) == 1


# --- a key reused, a key refused, a body refused ---------------------------------------------------


def test_same_key_different_payload_is_422_and_leaves_the_record_untouched(client: FlaskClient, ledger: Ledger) -> None:
    key, body = new_key(), payment_body()
    first = post_payment(client, key, body)
    [before] = ledger.records()
    for changed in ({**body, "amount": 100}, {**body, "currency": "USD"}, {**body, "orderId": "another-order"}):
        other = post_payment(client, key, changed)
        assert other.status_code == 422
        assert other.get_json()["type"] == "idempotency-key-reused"
    [after] = ledger.records()
    assert stored_for_the_key(after) == stored_for_the_key(before)
    assert post_payment(client, key, body).get_data() == first.get_data()
    assert len(payments_of(ledger)) == 1 and len(ledger.charges()) == 1


def test_missing_or_malformed_key_is_400_and_nothing_is_stored(client: FlaskClient, ledger: Ledger) -> None:
    for bad in (None, "", "short", "x" * 256, "has a space in it!!", f"{uuid.uuid4()},{uuid.uuid4()}"):
        response = post_payment(client, bad, payment_body())
        assert response.status_code == 400, bad
        assert response.get_json()["type"] == "invalid-idempotency-key"
    assert ledger.records() == [] and payments_of(ledger) == []


@pytest.mark.slow
def test_more_than_one_idempotency_key_header_is_400_and_nothing_is_stored(
    live_server: LiveServer, ledger: Ledger
) -> None:
    body = json.dumps(payment_body()).encode()
    request = (
        b"POST /api/payments HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer demo-alice-token\r\n"
        b"Content-Type: application/json\r\nIdempotency-Key: %s\r\nIdempotency-Key: %s\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (new_key().encode(), new_key().encode(), len(body), body)
    )
    status, _headers, answer = raw_request(live_server.url, request)
    assert status == 400
    assert json.loads(answer)["type"] == "invalid-idempotency-key"
    assert ledger.records() == [] and payments_of(ledger) == []


def test_no_or_unknown_token_is_401(client: FlaskClient, ledger: Ledger) -> None:
    anonymous = client.post("/api/payments", json=payment_body(), headers={"Idempotency-Key": new_key()})
    wrong = post_payment(client, new_key(), payment_body(), headers={"Authorization": "Bearer nope"})
    for response in (anonymous, wrong, client.get("/api/payments/pay_x")):
        assert response.status_code == 401
        assert response.mimetype == "application/problem+json"
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert ledger.records() == []


def test_malformed_json_is_400_not_json_is_415_too_large_is_413(client: FlaskClient, ledger: Ledger) -> None:
    headers = {**ALICE, "Idempotency-Key": new_key()}
    malformed = client.post("/api/payments", data="{not json", content_type="application/json", headers=headers)
    form = client.post(
        "/api/payments", data="amount=1", content_type="application/x-www-form-urlencoded", headers=headers
    )
    padded = json.dumps(payment_body(padding="x" * (64 * 1024)))
    large = client.post("/api/payments", data=padded, content_type="application/json", headers=headers)
    assert (malformed.status_code, form.status_code, large.status_code) == (400, 415, 413)
    assert {r.mimetype for r in (malformed, form, large)} == {"application/problem+json"}
    assert malformed.get_json()["type"] == "malformed-json"
    assert ledger.records() == [] and payments_of(ledger) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("orderId", None),
        ("orderId", ""),
        ("orderId", "o" * 65),
        ("orderId", "order 123"),
        ("orderId", "замовлення-1"),
        ("orderId", 123),
        ("amount", 0),
        ("amount", -1),
        ("amount", 1_000_000_001),
        ("amount", 499.5),
        ("amount", "49900"),
        ("amount", True),
        ("currency", "EUR"),
        ("currency", "uah"),
        ("currency", None),
        ("card_number", "4242 4242 4242 4241"),
        ("card_number", "４２４２４２４２４２４２４２４２"),
    ],
)
def test_an_invalid_field_is_422_with_its_error_and_the_key_stays_usable(
    client: FlaskClient, ledger: Ledger, field: str, value: object
) -> None:
    key, body = new_key(), payment_body()
    response = post_payment(client, key, {**body, field: value})
    assert response.status_code == 422
    problem = response.get_json()
    assert (problem["type"], list(problem["errors"])) == ("validation-error", [field])
    assert ledger.records() == [] and payments_of(ledger) == []
    assert post_payment(client, key, body).status_code == 201  # fixed, under the same key


def test_a_body_that_is_not_an_object_is_422(client: FlaskClient, ledger: Ledger) -> None:
    for body in ([], "order-123", 49900, None):
        headers = {**ALICE, "Idempotency-Key": new_key()}
        response = client.post("/api/payments", data=json.dumps(body), content_type="application/json", headers=headers)
        assert response.status_code == 422
        assert response.get_json()["errors"] == {"body": ["must be a JSON object"]}
    assert ledger.records() == []


def test_the_smallest_and_largest_amounts_and_both_currencies_are_paid(client: FlaskClient, ledger: Ledger) -> None:
    for amount, currency in ((1, "USD"), (1_000_000_000, "UAH")):
        response = post_payment(client, new_key(), payment_body(amount=amount, currency=currency))
        assert response.status_code == 201
        assert (response.get_json()["amount"], response.get_json()["currency"]) == (amount, currency)
    assert sorted(c.amount_cents for c in ledger.succeeded_charges()) == [1, 1_000_000_000]


# --- a decline, and one paid payment per orderId -----------------------------------------------------


def test_a_declined_card_is_402_stored_and_replayed(client: FlaskClient, ledger: Ledger) -> None:
    key, body = new_key(), payment_body(card=DECLINED_CARD)
    first = post_payment(client, key, body)
    assert first.status_code == 402
    problem = first.get_json()
    assert problem["type"] == "card-declined" and problem["order_id"] == body["orderId"]
    again = post_payment(client, key, body)
    assert again.status_code == 402 and again.get_data() == first.get_data()
    assert again.headers["Idempotent-Replayed"] == "true"
    [payment] = payments_of(ledger)
    assert (payment.status, payment.public_id) == ("declined", problem["payment_id"])
    assert [c.status for c in ledger.charges()] == ["declined"]


def test_after_a_decline_a_new_key_for_the_same_order_may_pay(client: FlaskClient, ledger: Ledger) -> None:
    declined = payment_body(card=DECLINED_CARD)
    declined_key = new_key()
    assert post_payment(client, declined_key, declined).status_code == 402
    paid = post_payment(client, new_key(), {**declined, "card_number": "4242 4242 4242 4242"})
    assert paid.status_code == 201 and paid.get_json()["order_id"] == declined["orderId"]
    assert sorted(p.status for p in payments_of(ledger)) == ["declined", "succeeded"]
    assert len(ledger.succeeded_charges()) == 1
    assert post_payment(client, declined_key, declined).status_code == 402  # still final under its own key


def test_a_new_key_for_an_order_already_paid_is_409_order_already_paid_with_the_payment(
    client: FlaskClient, ledger: Ledger
) -> None:
    body = payment_body()
    paid = post_payment(client, new_key(), body).get_json()
    second_key = new_key()
    again = post_payment(client, second_key, {**body, "amount": 100})  # another key, even another amount
    assert again.status_code == 409
    assert again.mimetype == "application/problem+json"
    problem = again.get_json()
    assert problem["type"] == "order-already-paid"
    assert problem["id"] == problem["payment_id"] == paid["id"]
    assert problem["order_id"] == body["orderId"]
    assert problem["idempotency_key"] == second_key  # as every 409 of the API names it
    assert "Retry-After" not in again.headers  # final: retrying will not change it
    replay = post_payment(client, second_key, {**body, "amount": 100})  # stored under the second key
    assert replay.get_data() == again.get_data() and replay.headers["Idempotent-Replayed"] == "true"
    assert len(payments_of(ledger)) == 1 and len(ledger.charges()) == 1


def test_the_same_order_id_from_two_customers_is_two_payments(client: FlaskClient, ledger: Ledger) -> None:
    body = payment_body()
    alice = post_payment(client, new_key(), body)
    bob = post_payment(client, new_key(), body, headers=BOB)
    assert alice.status_code == bob.status_code == 201
    assert alice.get_json()["id"] != bob.get_json()["id"]
    assert len(ledger.succeeded_charges()) == 2


@pytest.mark.slow
def test_two_keys_racing_for_one_order_charge_once(
    live_server: LiveServer, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, keys, url = payment_body(card=SLOW_CARD), [new_key(), new_key()], f"{live_server.url}/api/payments"
    together = SameInstantLooks(2).install(monkeypatch)  # both look at their key, then both claim at once
    replies = race(2, lambda i: post_json(url, body, {**ALICE, "Idempotency-Key": keys[i]}))
    assert together.met
    assert sorted(r.status for r in replies) == [201, 409]
    [winner] = [r for r in replies if r.status == 201]
    [loser] = [r for r in replies if r.status == 409]
    # Honest either way: the other key is still paying, or it has paid already.
    assert loser.json()["type"] in ("order-payment-in-progress", "order-already-paid")
    assert loser.json()["payment_id"] == winner.json()["id"]
    assert len(ledger.succeeded_charges()) == 1
    assert [p.status for p in payments_of(ledger)] == ["succeeded"]
    late = post_json(url, body, {**ALICE, "Idempotency-Key": keys[replies.index(loser)]})
    assert late.status == 409 and late.json()["type"] == "order-already-paid"
    assert late.json()["id"] == winner.json()["id"]


def test_a_second_key_while_the_first_is_still_paying_is_409_in_progress_and_not_stored(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    body, first_key = payment_body(card=VERY_SLOW_CARD), new_key()
    claim_payment_as_a_dying_worker(app, first_key, body, lease_seconds=60)  # pending, its worker at the gateway
    second_key = new_key()
    response = post_payment(client, second_key, {**body, "card_number": GOOD_CARD})  # its own card: a quick one
    assert response.status_code == 409
    [pending] = payments_of(ledger)
    assert response.get_json()["type"] == "order-payment-in-progress"
    assert response.get_json()["payment_id"] == pending.public_id
    assert response.get_json()["idempotency_key"] == second_key
    # Told when the other key's call must have ended, whatever this request's card: not 1, not before the other
    # key's own duplicate is told its call should be answered, and not after its lease.
    own_duplicate = post_payment(client, first_key, body)
    assert own_duplicate.status_code == 409 and int(own_duplicate.headers["Retry-After"]) > 1
    assert int(own_duplicate.headers["Retry-After"]) - 1 <= int(response.headers["Retry-After"]) <= 60
    assert [r.key for r in ledger.records()] != [second_key] and len(ledger.records()) == 1  # nothing stored
    assert ledger.charges() == []


def test_a_second_key_finding_the_order_held_by_a_dead_worker_ends_that_payment_and_pays(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    """The holder died before the gateway charged, and its lease ran out: the second key fences its gateway key,
    ends it failed, and pays the order itself, in one request, with no reconcile."""
    body, first_key, second_key = payment_body(card=VERY_SLOW_CARD), new_key(), new_key()
    claim_payment_as_a_dying_worker(app, first_key, body, lease_seconds=60)
    age_every_record(app)  # its lease has run out
    answer = post_payment(client, second_key, {**body, "card_number": GOOD_CARD})
    assert answer.status_code == 201 and answer.get_json()["status"] == "succeeded"
    dead, paid = sorted(payments_of(ledger), key=lambda p: p.idempotency_key != first_key)
    assert (dead.status, paid.status, paid.public_id) == ("failed", "succeeded", answer.get_json()["id"])
    [charge] = ledger.succeeded_charges()  # and the dead worker's gateway key voided: it can charge no more
    assert charge.id == paid.charge_id
    assert "holder_died" in ledger.events(IdempotencyEvent.key == second_key)
    late = post_payment(client, first_key, body)  # the dead worker's client, retrying: its payment's true end
    assert late.status_code == 402 and late.get_json()["type"] == "payment-abandoned"


def test_a_second_key_finding_the_order_charged_by_a_dead_worker_is_told_it_is_already_paid(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    """The holder's charge went through before it died: that charge stands, and the second key is told so, final."""
    body, first_key, second_key = payment_body(), new_key(), new_key()
    claim_payment_as_a_dying_worker(app, first_key, body, lease_seconds=60)
    [holder] = payments_of(ledger)
    charge_id = charge_as_its_holder(app, holder.public_id, holder.gateway_key, (holder.amount, holder.currency))
    age_every_record(app)
    answer = post_payment(client, second_key, body)
    assert answer.status_code == 409 and answer.get_json()["type"] == "order-already-paid"
    assert answer.get_json()["payment_id"] == holder.public_id
    [paid] = payments_of(ledger)
    assert (paid.status, paid.charge_id) == ("succeeded", charge_id)
    assert len(ledger.charges()) == 1
    assert post_payment(client, first_key, body).status_code == 201  # its own client: the payment, replayed


# --- the fault cards ------------------------------------------------------------------------------


def test_a_lost_answer_is_503_and_the_retry_finds_the_charge_instead_of_charging_again(
    client: FlaskClient, ledger: Ledger
) -> None:
    key, body = new_key(), payment_body(card=ANSWER_LOST_CARD)
    first = post_payment(client, key, body)
    assert first.status_code == 503 and int(first.headers["Retry-After"]) >= 1
    problem = first.get_json()
    [payment] = payments_of(ledger)
    assert (problem["type"], problem["idempotency_key"], problem["payment_id"]) == (
        "payment-unconfirmed",
        key,
        payment.public_id,
    )
    [charge] = ledger.charges()  # the gateway did charge
    assert payment.status == "pending"
    [record] = ledger.records()
    assert (record.state, record.locked_by, record.response_status) == ("in_progress", None, None)  # not stored
    retry = post_payment(client, key, body)
    assert retry.status_code == 201 and "Idempotent-Replayed" not in retry.headers
    assert retry.get_json()["charge_id"] == charge.id
    assert len(ledger.charges()) == 1
    assert post_payment(client, key, body).get_data() == retry.get_data()


def test_gateway_unavailable_is_503_nothing_stored_and_the_retry_resumes(client: FlaskClient, ledger: Ledger) -> None:
    key, body = new_key(), payment_body(card=UNAVAILABLE_CARD)
    first = post_payment(client, key, body)
    assert first.status_code == 503 and int(first.headers["Retry-After"]) >= 1
    assert ledger.charges() == []
    [record] = ledger.records()
    assert (record.recovery_point, record.locked_by, record.response_status) == ("payment_created", None, None)
    retry = post_payment(client, key, body)  # at once: the lease was released with the 503
    assert retry.status_code == 201
    assert len(ledger.succeeded_charges()) == 1
    assert "resumed" in ledger.events()


def test_a_payment_whose_outcome_is_unknown_names_your_order_id_and_its_key(client: FlaskClient) -> None:
    key, body = new_key(), payment_body(card=UNAVAILABLE_CARD)
    problem = post_payment(client, key, body).get_json()
    assert (problem["type"], problem["idempotency_key"], problem["order_id"]) == (
        "payment-unconfirmed",
        key,
        body["orderId"],
    )
    assert problem["payment_id"].startswith("pay_")


def test_a_payment_in_progress_reads_back_pending(client: FlaskClient) -> None:
    first = post_payment(client, new_key(), payment_body(card=ANSWER_LOST_CARD))
    read = client.get(f"/api/payments/{first.get_json()['payment_id']}", headers=ALICE)
    assert read.status_code == 200
    assert (read.get_json()["status"], read.get_json()["charge_id"]) == ("pending", None)


# --- finished without the client: the webhook, reconcile -------------------------------------------


def test_the_webhook_finishes_a_lost_answer_payment_whose_client_never_came_back(
    client: FlaskClient, ledger: Ledger
) -> None:
    key, body = new_key(), payment_body(card=ANSWER_LOST_CARD)
    payment_id = post_payment(client, key, body).get_json()["payment_id"]
    event = event_of(ledger, "charge.succeeded")
    assert event["data"]["reference"] == payment_id
    assert signed_post(client, event).get_json()["result"] == "applied"
    assert signed_post(client, event).get_json()["result"] == "duplicate"
    [charge] = ledger.succeeded_charges()
    read = client.get(f"/api/payments/{payment_id}", headers=ALICE).get_json()
    assert (read["status"], read["charge_id"]) == ("succeeded", charge.id)
    late = post_payment(client, key, body)  # if it does come back: the same payment, no second charge
    assert late.status_code == 201 and late.get_json() == read
    assert len(ledger.charges()) == 1


def test_a_charge_failed_event_declines_a_pending_payment_and_frees_its_order(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    body = payment_body()
    claim_payment_as_a_dying_worker(app, new_key(), body, lease_seconds=60)
    [pending] = payments_of(ledger)
    failed = {
        "id": "evt_" + uuid.uuid4().hex[:24],
        "type": "charge.failed",
        "created": 0,
        "data": {"id": "ch_declined", "reference": pending.public_id, "status": "declined"},
    }
    assert signed_post(client, failed).get_json()["result"] == "applied"
    assert [p.status for p in payments_of(ledger)] == ["declined"]
    assert post_payment(client, new_key(), body).status_code == 201  # the order is free for another try


def test_a_webhook_about_a_reference_that_is_neither_an_order_nor_a_payment_is_ignored(
    client: FlaskClient, ledger: Ledger
) -> None:
    for reference in ("pay_nothing", "order-123", "", "a\x00b"):
        event = {
            "id": "evt_" + uuid.uuid4().hex[:24],
            "type": "charge.succeeded",
            "created": 0,
            "data": {"id": "ch_x", "reference": reference},
        }
        answer = signed_post(client, event)
        assert (answer.status_code, answer.get_json()["result"]) == (200, "ignored"), reference


def test_reconcile_finishes_an_abandoned_payment_the_gateway_charged(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    key, body = new_key(), payment_body(card=ANSWER_LOST_CARD)
    assert post_payment(client, key, body).status_code == 503  # and the client never comes back
    output = reconcile_the_abandoned(app, runner)
    assert "succeeded" in output and "reconciled 1" in output, output
    [payment] = payments_of(ledger)
    [charge] = ledger.charges()
    assert (payment.status, payment.charge_id, charge.status) == ("succeeded", charge.id, "succeeded")
    [record] = ledger.records()
    assert (record.state, record.response_status) == ("completed", 201)
    late = post_payment(client, key, body)
    assert late.status_code == 201 and late.headers["Idempotent-Replayed"] == "true"
    assert late.get_json()["id"] == payment.public_id


def test_reconcile_fences_an_abandoned_unpaid_payment_and_ends_it_failed(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    key, body = new_key(), payment_body(card=UNAVAILABLE_CARD)
    assert post_payment(client, key, body).status_code == 503
    assert "failed" in reconcile_the_abandoned(app, runner)
    assert [p.status for p in payments_of(ledger)] == ["failed"]
    assert [c.status for c in ledger.charges()] == ["voided"]  # a stalled worker can no longer charge
    late = post_payment(client, key, body)
    assert late.status_code == 402 and late.get_json()["type"] == "payment-abandoned"
    again = post_payment(client, new_key(), {**body, "card_number": "4242 4242 4242 4242"})
    assert again.status_code == 201  # nothing was charged: the order may be paid with a new key
    assert len(ledger.succeeded_charges()) == 1


def test_reconcile_restarts_a_payment_that_created_nothing(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    key = new_key()
    nothing = {STARTED: Phase(commit=lambda _operation, _nothing: MoveTo("payment_created"))}
    with app.app_context():
        begin(Asked(once.store, Scope("cus_demo_alice", API_PAYMENTS, key), "f" * 64, nothing, Settings()))
        db.session.remove()
    assert "restarted" in reconcile_the_abandoned(app, runner)
    assert ledger.records() == [] and payments_of(ledger) == []
    assert post_payment(client, key, payment_body()).status_code == 201


# --- scopes and visibility ---------------------------------------------------------------------------


def test_one_key_for_an_order_and_for_a_payment_is_two_unrelated_operations(
    client: FlaskClient, ledger: Ledger
) -> None:
    key = new_key()
    order = post_order(client, key, order_body())
    payment = post_payment(client, key, payment_body())
    assert order.status_code == payment.status_code == 201
    assert "Idempotent-Replayed" not in payment.headers
    assert payment.get_json()["id"].startswith("pay_") and order.get_json()["id"].startswith("ord_")
    assert sorted(r.endpoint for r in ledger.records()) == ["POST /api/orders", API_PAYMENTS]
    assert post_order(client, key, order_body()).get_data() == order.get_data()  # each replays its own
    assert len(ledger.succeeded_charges()) == 2


def test_another_customers_payment_and_an_unknown_one_are_404(client: FlaskClient) -> None:
    payment = post_payment(client, new_key(), payment_body()).get_json()
    for path, headers in (
        (f"/api/payments/{payment['id']}", BOB),
        ("/api/payments/pay_0000000000", ALICE),
        ("/api/payments/x%00y", ALICE),
    ):
        response = client.get(path, headers=headers)
        assert response.status_code == 404, path
        assert response.mimetype == "application/problem+json"
        assert payment["id"] not in response.get_data(as_text=True)


def test_the_lab_ledger_lists_a_payments_charge(client: FlaskClient) -> None:
    payment = post_payment(client, new_key(), payment_body()).get_json()
    ledger = client.get("/api/lab/ledger").get_json()
    [charge] = ledger["charges"]
    assert (charge["payment_id"], charge["order_id"]) == (payment["id"], None)  # a payment's, not an order's
    assert (charge["status"], charge["amount_cents"]) == ("succeeded", 49900)
    assert ledger["totals"]["succeeded_charges"] == 1
    assert ledger["records"][0]["endpoint"] == API_PAYMENTS


def test_the_database_refuses_a_second_live_payment_for_one_order(app: Flask) -> None:
    """The rule's last line: whatever the code does, the partial unique index refuses the row."""
    with app.app_context():
        customer = db.session.scalar(sa.text("SELECT id FROM customers WHERE public_id = 'cus_demo_alice'"))
        row = {"customer_id": customer, "order_ref": "order-1", "amount": 100, "currency": "USD", "card_last4": "4242"}
        db.session.add(Payment(public_id="pay_a", idempotency_key="k1", gateway_key="g1", status="declined", **row))
        db.session.add(Payment(public_id="pay_b", idempotency_key="k2", gateway_key="g2", status="pending", **row))
        db.session.commit()  # a declined attempt holds nothing
        db.session.add(Payment(public_id="pay_c", idempotency_key="k3", gateway_key="g3", status="succeeded", **row))
        with pytest.raises(sa.exc.IntegrityError):
            db.session.commit()
        db.session.rollback()


@pytest.mark.parametrize(("amount", "currency"), [(0, "USD"), (-5, "UAH"), (1_000_000_001, "USD"), (100, "EUR")])
def test_the_database_refuses_an_amount_or_currency_outside_the_rules(app: Flask, amount: int, currency: str) -> None:
    with app.app_context():
        customer = db.session.scalar(sa.text("SELECT id FROM customers WHERE public_id = 'cus_demo_alice'"))
        db.session.add(
            Payment(
                public_id="pay_a",
                customer_id=customer,
                idempotency_key="k1",
                gateway_key="g1",
                order_ref="order-1",
                amount=amount,
                currency=currency,
                card_last4="4242",
            )
        )
        with pytest.raises(sa.exc.IntegrityError):
            db.session.commit()
        db.session.rollback()


def test_the_openapi_document_describes_the_payment_routes_every_answer_and_the_body_rules(
    client: FlaskClient,
) -> None:
    document = client.get("/api/openapi.json").get_json()
    validate(document)
    post = document["paths"]["/api/payments"]["post"]
    assert {"201", "400", "401", "402", "409", "413", "415", "422", "429", "503"} <= set(post["responses"])
    assert {"Location", "Idempotent-Replayed"} <= set(post["responses"]["201"]["headers"])
    assert all("Retry-After" in post["responses"][status]["headers"] for status in ("409", "503"))
    assert {p["$ref"].rsplit("/", 1)[1] for p in post["parameters"]} == {"IdempotencyKey", "Prefer"}
    assert {"200", "401", "404"} <= set(document["paths"]["/api/payments/{payment_id}"]["get"]["responses"])
    schemas = document["components"]["schemas"]
    request = schemas["PaymentRequest"]
    assert request["required"] == ["orderId", "amount", "currency"]
    order_id, amount, currency = (request["properties"][name] for name in ("orderId", "amount", "currency"))
    assert (order_id["minLength"], order_id["maxLength"], order_id["pattern"]) == (1, 64, "^[!-~]{1,64}$")
    assert (amount["type"], amount["minimum"], amount["maximum"]) == ("integer", 1, 1_000_000_000)
    assert currency["enum"] == ["UAH", "USD"]
    assert set(schemas["Payment"]["required"]) == {
        "id",
        "order_id",
        "amount",
        "currency",
        "status",
        "charge_id",
        "created_at",
    }
    text = str(document)
    for sent in ("order-already-paid", "order-payment-in-progress", "card-declined", "payment-unconfirmed"):
        assert f"`{sent}`" in text, sent


def test_the_reconciliation_report_accounts_for_a_payments_charge(client: FlaskClient, runner: FlaskCliRunner) -> None:
    assert post_payment(client, new_key(), payment_body()).status_code == 201
    result = runner.invoke(args=["gateway", "reconcile-report"])
    assert result.exit_code == 0, result.output


def test_a_payment_is_counted_and_timed_under_its_own_endpoint(client: FlaskClient) -> None:
    labels = {"endpoint": API_PAYMENTS}
    names = ("checkout_claims_total", "checkout_replays_total", "checkout_latency_seconds_count")
    before = [REGISTRY.get_sample_value(name, labels) or 0.0 for name in names]
    key, body = new_key(), payment_body()
    post_payment(client, key, body)
    post_payment(client, key, body)
    after = [REGISTRY.get_sample_value(name, labels) or 0.0 for name in names]
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 2]


any_text = st.text(st.characters(exclude_categories=()), max_size=70)
any_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats() | any_text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(any_text, children, max_size=3),
    max_leaves=8,
)
payment_bodies = st.one_of(
    any_value,
    st.fixed_dictionaries(
        {
            "orderId": st.one_of(any_text, any_value),
            "amount": st.one_of(st.integers(-5, 1_000_000_005), any_value),
            "currency": st.one_of(st.sampled_from(["UAH", "USD", "EUR", "uah"]), any_value),
        },
        optional={"card_number": st.one_of(st.sampled_from(["4242 4242 4242 4242", "4000 0000 0000 0002"]), any_text)},
    ),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=payment_bodies, key=st.one_of(st.none(), st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E))))
def test_no_payment_body_or_key_gets_a_5xx_and_a_refusal_writes_nothing(
    app: Flask, client: FlaskClient, body: object, key: str | None
) -> None:
    headers = {**ALICE, **({"Idempotency-Key": key} if key is not None else {})}
    before = table_counts(app)
    data = json.dumps(body).encode("utf-8", "surrogatepass")
    response = client.post("/api/payments", data=data, content_type="application/json", headers=headers)
    assert response.status_code < 500, response.get_data(as_text=True)[:300]
    if response.status_code >= 400:
        assert response.mimetype == "application/problem+json"
    if response.status_code in (400, 413, 415) or (response.get_json() or {}).get("type") == "validation-error":
        assert table_counts(app) == before
