"""Refunds: a second idempotent endpoint with its own key scope; never more refunded than charged."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner
from sqlalchemy.exc import IntegrityError

from checkout.database import writing
from checkout.gateway import GatewayRefund, RefundExceedsCharge
from checkout.shop.models import Order, Refund
from checkout.shop.payment import gateway
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    BOB,
    DECLINED_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    checkout_with_a_mug,
    form_fields,
    order_body,
    post_order,
    race,
    reconcile_the_abandoned,
    table_counts,
)

TOTAL = 2 * 1400 + 500  # order_body(): two mugs and a sticker pack


def paid_order(client: FlaskClient, card: str = "4242 4242 4242 4242") -> dict[str, Any]:
    key = str(uuid.uuid4())
    response = post_order(client, key, order_body(card=card))
    if response.status_code == 503:  # a fault card: the retry finishes the payment
        response = post_order(client, key, order_body(card=card))
    assert response.status_code == 201, response.get_json()
    return dict(response.get_json())


def refund(client: FlaskClient, order_id: str, key: str, body: Any = None, headers: dict[str, str] | None = None):
    return client.post(
        f"/api/orders/{order_id}/refunds",
        json=body if body is not None else {},
        headers={**(headers or ALICE), "Idempotency-Key": key},
    )


def test_a_refund_is_201_with_location_and_gives_back_everything_left_by_default(
    client: FlaskClient, ledger: Ledger
) -> None:
    order = paid_order(client)
    response = refund(client, order["id"], str(uuid.uuid4()), {"reason": "changed my mind"})
    assert response.status_code == 201
    body = response.get_json()
    assert body["id"].startswith("re_")
    assert response.headers["Location"] == f"/api/orders/{order['id']}/refunds/{body['id']}"
    assert (body["order_id"], body["amount_cents"], body["currency"], body["status"]) == (
        order["id"],
        TOTAL,
        "USD",
        "succeeded",
    )
    refreshed = client.get(f"/api/orders/{order['id']}", headers=ALICE).get_json()
    assert refreshed["status"] == "refunded" and refreshed["refunded_cents"] == TOTAL
    assert [r["id"] for r in refreshed["refunds"]] == [body["id"]]
    assert [r.amount_cents for r in ledger.rows(GatewayRefund)] == [TOTAL]


def test_partial_refunds_move_the_order_to_partially_refunded_then_refunded(client: FlaskClient) -> None:
    order = paid_order(client)
    first = refund(client, order["id"], str(uuid.uuid4()), {"amount_cents": 1000})
    assert first.status_code == 201
    assert client.get(f"/api/orders/{order['id']}", headers=ALICE).get_json()["status"] == "partially_refunded"
    rest = refund(client, order["id"], str(uuid.uuid4()))  # no amount: everything that is left
    assert rest.status_code == 201 and rest.get_json()["amount_cents"] == TOTAL - 1000
    assert client.get(f"/api/orders/{order['id']}", headers=ALICE).get_json()["status"] == "refunded"


def test_a_refund_replay_is_byte_identical_and_refunds_once(client: FlaskClient, ledger: Ledger) -> None:
    order = paid_order(client)
    key = str(uuid.uuid4())
    first = refund(client, order["id"], key, {"amount_cents": 500})
    again = refund(client, order["id"], key, {"amount_cents": 500})
    assert again.status_code == 201 and again.get_data() == first.get_data()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(ledger.rows(Refund)) == 1 and len(ledger.rows(GatewayRefund)) == 1


def test_one_key_for_refunds_of_two_orders_is_422_key_reused(client: FlaskClient, ledger: Ledger) -> None:
    one, two = paid_order(client), paid_order(client)
    key = str(uuid.uuid4())
    assert refund(client, one["id"], key, {"amount_cents": 500}).status_code == 201
    reused = refund(client, two["id"], key, {"amount_cents": 500})
    assert reused.status_code == 422 and reused.get_json()["type"] == "idempotency-key-reused"
    assert len(ledger.rows(Refund)) == 1


def test_one_key_string_used_for_an_order_and_for_a_refund_is_two_unrelated_operations(
    client: FlaskClient, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    order = post_order(client, key).get_json()
    refunded = refund(client, order["id"], key, {"amount_cents": 500})
    assert refunded.status_code == 201 and "Idempotent-Replayed" not in refunded.headers
    assert {r.endpoint for r in ledger.records()} == {"POST /api/orders", "POST /api/orders/<order_id>/refunds"}


def test_another_customers_order_is_404_and_nothing_is_stored(app: Flask, client: FlaskClient) -> None:
    order = paid_order(client)
    before = table_counts(app)
    assert refund(client, order["id"], str(uuid.uuid4()), headers=BOB).status_code == 404
    assert client.get(f"/api/orders/{order['id']}/refunds/re_nope", headers=ALICE).status_code == 404
    assert table_counts(app) == before


def test_an_order_that_is_not_paid_is_422_not_refundable_and_nothing_is_stored(app: Flask, client: FlaskClient) -> None:
    declined = post_order(client, str(uuid.uuid4()), order_body(card=DECLINED_CARD)).get_json()
    before = table_counts(app)
    key = str(uuid.uuid4())
    response = refund(client, declined["order_id"], key)
    assert response.status_code == 422 and response.get_json()["type"] == "order-not-refundable"
    assert table_counts(app) == before  # the key stays usable


def test_more_than_is_left_is_422_refund_exceeds_charge_stored_and_replayed(client: FlaskClient) -> None:
    order = paid_order(client)
    key = str(uuid.uuid4())
    first = refund(client, order["id"], key, {"amount_cents": TOTAL + 1})
    assert first.status_code == 422 and first.get_json()["type"] == "refund-exceeds-charge"
    again = refund(client, order["id"], key, {"amount_cents": TOTAL + 1})
    assert again.get_data() == first.get_data() and again.headers["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize(
    "body", [{"amount_cents": 0}, {"amount_cents": -5}, {"amount_cents": "5"}, {"reason": "x" * 201}, [1, 2]]
)
def test_a_bad_refund_body_is_422_and_nothing_is_stored(app: Flask, client: FlaskClient, body: Any) -> None:
    order = paid_order(client)
    before = table_counts(app)
    assert refund(client, order["id"], str(uuid.uuid4()), body).status_code == 422
    assert table_counts(app) == before


@pytest.mark.parametrize("card", [UNAVAILABLE_CARD, ANSWER_LOST_CARD], ids=["gateway down", "answer lost"])
def test_the_fault_cards_fail_a_refund_once_and_the_retry_refunds_once(
    client: FlaskClient, ledger: Ledger, card: str
) -> None:
    order = paid_order(client, card)
    key = str(uuid.uuid4())
    first = refund(client, order["id"], key, {"amount_cents": 700})
    assert first.status_code == 503 and first.headers["Retry-After"]
    assert first.get_json()["refund_id"].startswith("re_")
    retry = refund(client, order["id"], key, {"amount_cents": 700})
    assert retry.status_code == 201
    assert [r.amount_cents for r in ledger.rows(GatewayRefund)] == [700]


def test_a_refund_whose_outcome_is_unknown_names_its_order_and_its_key(client: FlaskClient) -> None:
    order = paid_order(client, UNAVAILABLE_CARD)
    key = str(uuid.uuid4())
    problem = refund(client, order["id"], key, {"amount_cents": 700}).get_json()
    assert (problem["type"], problem["title"]) == ("payment-unconfirmed", "Refund not confirmed yet")
    assert (problem["idempotency_key"], problem["order_id"]) == (key, order["id"])
    assert problem["refund_id"].startswith("re_") and "never refunds twice" in problem["detail"]


def test_reconcile_finishes_a_refund_whose_client_never_came_back(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    order = paid_order(client, ANSWER_LOST_CARD)
    key = str(uuid.uuid4())
    assert refund(client, order["id"], key, {"amount_cents": 700}).status_code == 503
    assert "refunded" in reconcile_the_abandoned(app, runner)
    [row] = ledger.rows(Refund)
    assert row.status == "succeeded"
    late = refund(client, order["id"], key, {"amount_cents": 700})
    assert late.status_code == 201 and late.headers["Idempotent-Replayed"] == "true"


def test_racing_duplicates_of_one_refund_refund_once(app: Flask, ledger: Ledger) -> None:
    order = paid_order(app.test_client())
    key = str(uuid.uuid4())
    answers = race(8, lambda _i: refund(app.test_client(), order["id"], key, {"amount_cents": 300}).status_code)
    assert set(answers) <= {201, 409}, answers
    assert len(ledger.rows(Refund)) == 1 and len(ledger.rows(GatewayRefund)) == 1


def test_the_database_refuses_to_refund_more_than_an_order_total(app: Flask, client: FlaskClient) -> None:
    order = paid_order(client)
    with app.app_context(), pytest.raises(IntegrityError), writing() as tx:
        tx.execute(sa.update(Order).where(Order.public_id == order["id"]).values(refunded_cents=TOTAL + 1))


def test_the_gateway_refuses_to_refund_more_than_it_charged(app: Flask, client: FlaskClient, ledger: Ledger) -> None:
    order = paid_order(client)
    with app.app_context():
        gateway().refund(refund_key="rk-1", charge_id=order["charge_id"], amount_cents=TOTAL, currency="USD")
        with pytest.raises(RefundExceedsCharge):
            gateway().refund(refund_key="rk-2", charge_id=order["charge_id"], amount_cents=1, currency="USD")
    assert [r.refund_key for r in ledger.rows(GatewayRefund)] == ["rk-1"]


def test_a_double_submitted_refund_form_refunds_once_and_says_so(client: FlaskClient, ledger: Ledger) -> None:
    fields = checkout_with_a_mug(client)
    paid = client.post("/checkout", data={**fields, "email": "s@example.com", "card_number": "4242424242424242"})
    order_url = paid.headers["Location"]
    form = form_fields(client.get(order_url).get_data(as_text=True), "refund-form")
    assert form["idempotency_key"]
    first = client.post(f"{order_url}/refunds", data={**form, "amount": "5.00"})
    again = client.post(f"{order_url}/refunds", data={**form, "amount": "5.00"})  # the same form, sent twice
    assert first.status_code == again.status_code == 303
    page = client.get(order_url).get_data(as_text=True)
    assert 'data-testid="refund-replay-notice"' in page
    assert len(ledger.rows(Refund)) == 1 and [r.amount_cents for r in ledger.rows(GatewayRefund)] == [500]


def test_the_refund_form_answers_bad_input_with_a_page_and_writes_nothing(app: Flask, client: FlaskClient) -> None:
    fields = checkout_with_a_mug(client)
    order_url = client.post(
        "/checkout", data={**fields, "email": "s@example.com", "card_number": "4242 4242 4242 4242"}
    ).headers["Location"]
    form = form_fields(client.get(order_url).get_data(as_text=True), form_id="refund-form")
    stranger = app.test_client()
    stranger_csrf = form_fields(stranger.get("/").get_data(as_text=True), form_id=None)["csrf_token"]
    before = table_counts(app)
    answers = {
        "unknown order": client.post("/orders/ord_nope/refunds", data=form),
        "no key": client.post(f"{order_url}/refunds", data={**form, "idempotency_key": ""}),
        "not an amount": client.post(f"{order_url}/refunds", data={**form, "amount": "five"}),
        "negative": client.post(f"{order_url}/refunds", data={**form, "amount": "-1"}),
        "no CSRF": client.post(f"{order_url}/refunds", data={**form, "csrf_token": ""}),
        "another browser": stranger.post(f"{order_url}/refunds", data={**form, "csrf_token": stranger_csrf}),
    }
    statuses = {name: answer.status_code for name, answer in answers.items()}
    assert statuses == {
        "unknown order": 404,
        "no key": 400,
        "not an amount": 422,
        "negative": 422,
        "no CSRF": 400,
        "another browser": 404,
    }
    assert all(a.mimetype == "text/html" and b"Traceback" not in a.get_data() for a in answers.values())
    assert table_counts(app) == before


def test_a_refund_body_of_json_null_is_422_and_refunds_nothing(app: Flask, client: FlaskClient) -> None:
    order = paid_order(client)
    before = table_counts(app)
    answer = client.post(
        f"/api/orders/{order['id']}/refunds",
        data="null",
        content_type="application/json",
        headers={**ALICE, "Idempotency-Key": str(uuid.uuid4())},
    )
    assert answer.status_code == 422 and answer.get_json()["errors"] == {"body": ["must be a JSON object"]}
    assert table_counts(app) == before


def test_an_empty_refund_body_still_refunds_all_that_is_left(client: FlaskClient) -> None:
    order = paid_order(client)
    answer = client.post(f"/api/orders/{order['id']}/refunds", headers={**ALICE, "Idempotency-Key": str(uuid.uuid4())})
    assert answer.status_code == 201 and answer.get_json()["amount_cents"] == TOTAL
