"""GET /api/lab/requests?key=K: the requests the shop received under a key, oldest first, each with the
status it was answered and whether that was a replay (for QA: how many submits reached the shop)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.audit import IdempotencyRecord
from checkout.database import utcnow
from checkout.extensions import db
from checkout.lab.tables import LabRequest
from checkout.shop.payments import API_PAYMENTS
from tests.conftest import LiveServer, make_app
from tests.helpers import (
    ALICE,
    BOB,
    SLOW_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    checkout_with_a_mug,
    first_in_progress,
    form_fields,
    order_body,
    pay_in_browser,
    post_order,
    purge_every_record,
)
from tests.http import post_json, send
from tests.payments import new_key, payment_body, payments_of, post_payment


def requests_of(client: FlaskClient, key: str) -> list[dict[str, Any]]:
    response = client.get("/api/lab/requests", query_string={"key": key})
    assert response.status_code == 200 and response.mimetype == "application/json"
    found: list[dict[str, Any]] = response.get_json()
    return found


def answers(found: list[dict[str, Any]]) -> list[tuple[str, str, int | None, bool]]:
    return [(r["endpoint"], r["customer"], r["status"], r["replayed"]) for r in found]


def test_every_request_under_a_key_is_listed_oldest_first_on_every_endpoint(client: FlaskClient) -> None:
    key, body = new_key(), payment_body()
    post_payment(client, key, body)
    post_payment(client, key, body)  # a replay
    post_payment(client, key, {**body, "amount": 1})  # the key reused with another body
    post_order(client, key, order_body())  # the same key string on another endpoint
    post_payment(client, key, body, headers=BOB)  # and from another customer
    found = requests_of(client, key)
    assert answers(found) == [
        (API_PAYMENTS, "cus_demo_alice", 201, False),
        (API_PAYMENTS, "cus_demo_alice", 201, True),
        (API_PAYMENTS, "cus_demo_alice", 422, False),
        ("POST /api/orders", "cus_demo_alice", 201, False),
        (API_PAYMENTS, "cus_demo_bob", 201, False),
    ]
    assert [r["received_at"] for r in found] == sorted(r["received_at"] for r in found)
    assert all(set(r) == {"endpoint", "customer", "received_at", "status", "replayed"} for r in found)


def test_a_503_and_the_retry_that_resumed_it_are_two_requests(client: FlaskClient) -> None:
    key, body = new_key(), payment_body(card=UNAVAILABLE_CARD)
    assert post_payment(client, key, body).status_code == 503
    assert post_payment(client, key, body).status_code == 201
    assert [(r["status"], r["replayed"]) for r in requests_of(client, key)] == [(503, False), (201, False)]


def test_a_request_answered_202_with_respond_async_is_listed_as_202(client: FlaskClient) -> None:
    key, body = new_key(), payment_body(card=UNAVAILABLE_CARD)
    accepted = post_payment(client, key, body, headers={**ALICE, "Prefer": "respond-async"})
    assert accepted.status_code == 202 and accepted.headers["Preference-Applied"] == "respond-async"
    assert post_payment(client, key, body).status_code == 201
    assert [(r["status"], r["replayed"]) for r in requests_of(client, key)] == [(202, False), (201, False)]


@pytest.mark.slow
@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_SLOW_CARD_SECONDS": 3}])  # room for a read and a duplicate
def test_a_duplicate_that_arrived_while_the_first_ran_is_told_apart_from_it(
    app: Flask, live_server: LiveServer, ledger: Ledger, app_overrides: dict[str, Any]
) -> None:
    """Listed in the order they arrived, though the duplicate was answered first; the first is listed while it
    pays, its status not known yet."""
    key, body, url = new_key(), payment_body(card=SLOW_CARD), f"{live_server.url}/api/payments"
    listing = f"{live_server.url}/api/lab/requests?key={key}"
    # The block runs once the first is at the gateway.
    with first_in_progress(url, body, key, until=lambda: payments_of(ledger)) as first:
        assert [(r["status"], r["replayed"]) for r in send("GET", listing).json()] == [(None, False)]
        duplicate = post_json(url, body, {**ALICE, "Idempotency-Key": key})
        assert (first.result(timeout=30).status, duplicate.status) == (201, 409)
    replay = post_json(url, body, {**ALICE, "Idempotency-Key": key})
    assert replay.status == 201
    listed = send("GET", listing).json()
    assert [(r["status"], r["replayed"]) for r in listed] == [(201, False), (409, False), (201, True)]
    assert live_server.post_count("/api/payments") == len(listed)


def test_a_double_submit_of_the_browser_checkout_is_two_requests_one_replayed(client: FlaskClient) -> None:
    fields = checkout_with_a_mug(client)
    assert pay_in_browser(client, fields).status_code == 303
    assert pay_in_browser(client, fields).status_code == 303
    found = requests_of(client, fields["idempotency_key"])
    assert [(r["endpoint"], r["status"], r["replayed"]) for r in found] == [
        ("POST /checkout", 303, False),
        ("POST /checkout", 303, True),
    ]


def test_a_request_refused_before_its_key_was_claimed_is_listed_with_its_answer(client: FlaskClient) -> None:
    key, body = new_key(), payment_body()
    assert post_payment(client, key, {**body, "amount": 0}).status_code == 422  # the engine never saw it
    assert post_payment(client, key, body).status_code == 201
    assert answers(requests_of(client, key)) == [
        (API_PAYMENTS, "cus_demo_alice", 422, False),
        (API_PAYMENTS, "cus_demo_alice", 201, False),
    ]
    assert requests_of(client, "never-used-key-0001") == []


def test_a_request_with_an_unknown_token_writes_nothing(
    app: Flask, client: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    """An anonymous client cannot make the lab write: a storm of refusals under fresh keys leaves no row, and
    no write was even tried."""
    keys = [new_key() for _ in range(20)]
    for key in keys:
        assert post_order(client, key, order_body(), headers={"Authorization": "Bearer nobody"}).status_code == 401
    assert requests_of(client, keys[0]) == []
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(LabRequest)) == 0
        db.session.remove()
    assert "the lab could not note" not in caplog.text


def test_a_malformed_key_is_listed_under_what_was_sent(client: FlaskClient) -> None:
    assert post_order(client, "too-short", order_body()).status_code == 400
    assert answers(requests_of(client, "too-short")) == [("POST /api/orders", "cus_demo_alice", 400, False)]


def test_a_request_refused_inside_the_claim_is_listed_once(client: FlaskClient) -> None:
    key = new_key()
    unsold = order_body(items=[{"sku": "NOT-SOLD", "quantity": 1}])
    assert post_order(client, key, unsold).status_code == 422
    assert [r["status"] for r in requests_of(client, key)] == [422]


def test_a_checkout_form_refused_before_the_claim_is_listed_under_its_key(client: FlaskClient) -> None:
    fields = checkout_with_a_mug(client)
    assert pay_in_browser(client, fields, card="1234").status_code == 422
    assert pay_in_browser(client, fields).status_code == 303
    found = requests_of(client, fields["idempotency_key"])
    assert [(r["endpoint"], r["status"], r["replayed"]) for r in found] == [
        ("POST /checkout", 422, False),
        ("POST /checkout", 303, False),
    ]
    assert found[0]["customer"] == found[1]["customer"] is not None


def test_without_a_key_it_is_400(client: FlaskClient) -> None:
    response = client.get("/api/lab/requests")
    assert response.status_code == 400 and response.mimetype == "application/problem+json"


def test_with_the_lab_off_it_does_not_exist(client: FlaskClient, lab_off: Flask) -> None:
    key = new_key()
    post_payment(client, key, payment_body())
    assert lab_off.test_client().get("/api/lab/requests", query_string={"key": key}).status_code == 404
    assert client.get("/api/lab/requests", query_string={"key": key}).status_code == 200


def test_a_lab_note_that_cannot_be_written_never_changes_the_answer(
    app: Flask, client: FlaskClient, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    with app.app_context():
        db.session.execute(sa.text("DROP TABLE lab_requests"))
        db.session.commit()
    try:
        refused = post_payment(client, new_key(), payment_body(amount=0))
        paid = post_payment(client, new_key(), payment_body())
    finally:  # on PostgreSQL the next test of this process empties and reuses this schema: give the table back
        with app.app_context():
            LabRequest.__table__.create(db.engine)
    assert refused.status_code == 422 and refused.mimetype == "application/problem+json"
    assert paid.status_code == 201 and [p.status for p in payments_of(ledger)] == ["succeeded"]
    assert len(ledger.succeeded_charges()) == 1
    assert "the lab could not note a request" in caplog.text


def test_a_checkout_form_whose_csrf_token_failed_is_listed_under_its_key(client: FlaskClient) -> None:
    fields = checkout_with_a_mug(client)
    assert pay_in_browser(client, {**fields, "csrf_token": "forged"}).status_code == 400
    found = requests_of(client, fields["idempotency_key"])
    assert [(r["endpoint"], r["status"]) for r in found] == [("POST /checkout", 400)]


def test_refusals_and_answered_requests_are_listed_in_the_order_they_arrived(client: FlaskClient) -> None:
    key, body = new_key(), payment_body()
    assert post_payment(client, key, body).status_code == 201
    assert post_payment(client, key, {**body, "amount": 0}).status_code == 422  # refused before the engine
    assert post_payment(client, key, body).status_code == 201
    assert [(r["status"], r["replayed"]) for r in requests_of(client, key)] == [(201, False), (422, False), (201, True)]


def test_a_refusal_on_a_mistakes_twin_is_listed_under_the_twins_own_endpoint(client: FlaskClient) -> None:
    key = new_key()
    twin = "/api/lab/mistakes/no-fingerprint/orders"
    assert client.post(twin, json={"items": []}, headers={**ALICE, "Idempotency-Key": key}).status_code == 422
    assert client.post(twin, json=order_body(), headers={**ALICE, "Idempotency-Key": key}).status_code == 201
    assert [(r["endpoint"], r["status"]) for r in requests_of(client, key)] == [
        ("POST /api/lab/mistakes/no-fingerprint/orders", 422),
        ("POST /api/lab/mistakes/no-fingerprint/orders", 201),
    ]


def test_a_request_the_throttle_refused_is_not_noted(database_url: str, tmp_path: Any) -> None:
    """429 is the throttle's cheap answer: the lab writes nothing for it."""
    limited = make_app(database_url, str(tmp_path / "limited"), CHECKOUT_RATE_LIMIT="2 per minute")
    client, key = limited.test_client(), new_key()
    statuses = [post_payment(client, key, payment_body(amount=0)).status_code for _ in range(3)]
    assert statuses == [422, 422, 429]
    assert [r["status"] for r in requests_of(client, key)] == [422, 422]
    with limited.app_context():
        db.engine.dispose()


def test_the_labs_purge_of_every_key_empties_its_log(client: FlaskClient) -> None:
    key = new_key()
    assert post_payment(client, key, payment_body(amount=0)).status_code == 422
    page = client.get("/lab")
    assert page.status_code == 200
    token = form_fields(page.get_data(as_text=True), None)["csrf_token"]
    assert client.post("/lab/purge-keys", data={"csrf_token": token}).status_code == 303
    assert requests_of(client, key) == []


def test_a_purge_of_a_keys_record_takes_its_requests_out_of_the_log_and_no_others(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner
) -> None:
    key, refused = new_key(), new_key()
    assert post_payment(client, key, payment_body()).status_code == 201  # the one record purged below
    assert post_payment(client, key, payment_body(), headers=BOB).status_code == 201  # the same key, another customer
    assert post_order(client, key, order_body()).status_code == 201  # and another endpoint
    assert post_payment(client, refused, payment_body(amount=0)).status_code == 422  # never recorded
    with app.app_context():
        alices_payment = (IdempotencyRecord.customer == "cus_demo_alice") & (IdempotencyRecord.endpoint == API_PAYMENTS)
        db.session.execute(sa.update(IdempotencyRecord).where(alices_payment).values(expires_at=utcnow()))
        db.session.commit()
    assert "purged 1 expired" in runner.invoke(args=["idempotency", "purge"]).output
    assert answers(requests_of(client, key)) == [
        (API_PAYMENTS, "cus_demo_bob", 201, False),
        ("POST /api/orders", "cus_demo_alice", 201, False),
    ]
    assert [r["status"] for r in requests_of(client, refused)] == [422]


def test_a_purge_takes_a_browser_checkouts_requests_out_of_the_log(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner
) -> None:
    fields = checkout_with_a_mug(client)
    assert pay_in_browser(client, fields).status_code == 303
    assert len(requests_of(client, fields["idempotency_key"])) == 1
    assert "purged 1 expired" in purge_every_record(app, runner)
    assert requests_of(client, fields["idempotency_key"]) == []
