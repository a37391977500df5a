"""Late retries: the key's record is gone (purged after its lifetime, or deleted), and what still
answers is the business table's own unique constraint. An order is unique on (customer, idempotency
key), a refund on (order, idempotency key): a retry after the purge gets the order or refund the key
made, never a sold-out answer for stock its own order holds, never a refusal for money it refunded
itself, never a 500. (The same on the lab's Redis store: tests/test_late_retries_on_redis.py.)"""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.audit import IdempotencyRecord
from checkout.extensions import db
from checkout.gateway import GatewayRefund
from checkout.shop.models import Refund
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    GOOD_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    add_to_cart,
    checkout_fields,
    order_body,
    pay_in_browser,
    post_order,
    purge_every_record,
    stock_of,
    stock_out_of_balance,
)

LAST_ITEM = [{"sku": "LAST-01", "quantity": 1}]  # the seed's product with a stock of 1, listed last
TOTAL = 2 * 1400 + 500  # order_body(): two mugs and a sticker pack


def purge_every_completed_record(app: Flask, runner: FlaskCliRunner) -> None:
    """Let every completed record outlive its lifetime, then run ``flask idempotency purge``: none is left."""
    assert "purged" in purge_every_record(app, runner)
    assert Ledger(app).records() == []


def refund(client: FlaskClient, order_id: str, key: str, body: dict[str, Any] | None = None) -> Any:
    return client.post(f"/api/orders/{order_id}/refunds", json=body or {}, headers={**ALICE, "Idempotency-Key": key})


# --- orders: the existing order is found before any stock is taken ---------------------------------


def test_a_late_retry_for_the_last_item_after_the_purge_gets_the_paid_order_not_out_of_stock(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    first = post_order(client, key, order_body(items=LAST_ITEM))
    assert first.status_code == 201 and stock_of(app, "LAST-01") == 0
    purge_every_completed_record(app, runner)
    late = post_order(client, key, order_body(items=LAST_ITEM))
    assert late.status_code == 201, late.get_json()
    assert late.get_data() == first.get_data() and late.headers["Location"] == first.headers["Location"]
    [order] = ledger.orders()
    assert (order.public_id, order.status) == (first.get_json()["id"], "paid")
    assert [c.reference for c in ledger.succeeded_charges()] == [order.public_id]  # no second charge
    assert stock_of(app, "LAST-01") == 0 and stock_out_of_balance(app) == {}
    [record] = ledger.records()  # the late retry's answer is stored again under the key: the order
    assert record.response_status == 201


def test_a_second_key_for_a_cart_version_whose_last_item_is_being_paid_is_told_in_progress_not_sold_out(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    add_to_cart(client, "LAST-01")
    fields = {**checkout_fields(client), "email": "s@example.com"}
    unconfirmed = client.post("/checkout", data={**fields, "card_number": UNAVAILABLE_CARD})
    assert unconfirmed.status_code == 503  # the order is pending and holds the last lamp
    forged = {**fields, "card_number": "4242424242424242", "idempotency_key": str(uuid.uuid4())}
    second = client.post("/checkout", data=forged)  # a forged form (another key) for the same cart version
    assert second.status_code == 202, second.get_data(as_text=True)  # the cart version's payment is under way
    assert "sold out" not in second.get_data(as_text=True)
    assert checkout_fields(client)["idempotency_key"] == fields["idempotency_key"]  # the cart version lives on
    [order] = ledger.orders()
    assert order.status == "pending" and stock_of(app, "LAST-01") == 0 and stock_out_of_balance(app) == {}


# --- refunds: the existing refund is found before what is left is checked ----------------------------


def test_a_late_retry_of_a_refund_that_emptied_the_order_answers_with_that_refund(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    order = post_order(client, str(uuid.uuid4())).get_json()
    key = str(uuid.uuid4())
    first = refund(client, order["id"], key)  # everything that is left
    assert first.status_code == 201 and first.get_json()["amount_cents"] == TOTAL
    purge_every_completed_record(app, runner)
    late = refund(client, order["id"], key)
    assert late.status_code == 201, late.get_json()
    assert late.get_data() == first.get_data() and late.headers["Location"] == first.headers["Location"]
    assert [r.amount_cents for r in ledger.rows(Refund)] == [TOTAL]
    assert [r.amount_cents for r in ledger.rows(GatewayRefund)] == [TOTAL]


def test_a_late_retry_of_a_partial_refund_answers_with_that_refund_and_refunds_nothing_more(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    order = post_order(client, str(uuid.uuid4())).get_json()
    key = str(uuid.uuid4())
    first = refund(client, order["id"], key, {"amount_cents": 700})
    assert first.status_code == 201
    purge_every_completed_record(app, runner)
    late = refund(client, order["id"], key, {"amount_cents": 700})
    assert late.status_code == 201, late.get_json()
    assert late.get_data() == first.get_data() and late.headers["Location"] == first.headers["Location"]
    [paid] = ledger.orders()
    assert (paid.status, paid.refunded_cents) == ("partially_refunded", 700)
    assert [r.amount_cents for r in ledger.rows(Refund)] == [700]
    assert [r.amount_cents for r in ledger.rows(GatewayRefund)] == [700]


def test_a_retry_of_an_unconfirmed_refund_whose_record_was_deleted_finishes_that_refund_not_a_second(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    order_key = str(uuid.uuid4())
    assert post_order(client, order_key, order_body(card=ANSWER_LOST_CARD)).status_code == 503
    order_id = post_order(client, order_key, order_body(card=ANSWER_LOST_CARD)).get_json()["id"]  # paid
    key = str(uuid.uuid4())
    first = refund(client, order_id, key, {"amount_cents": 700})
    assert first.status_code == 503  # the gateway refunded; its answer was lost
    with app.app_context():  # the record is gone (deleted by hand): only the refunds' unique (order, key) is left
        db.session.execute(sa.delete(IdempotencyRecord).where(IdempotencyRecord.key == key))
        db.session.commit()
    retry = refund(client, order_id, key, {"amount_cents": 700})
    assert retry.status_code == 201, retry.get_json()
    assert retry.get_json()["id"] == first.get_json()["refund_id"] and retry.get_json()["status"] == "succeeded"
    assert [r.amount_cents for r in ledger.rows(Refund)] == [700]
    assert [r.amount_cents for r in ledger.rows(GatewayRefund)] == [700]


def test_a_late_browser_retry_after_the_purge_shows_the_paid_order_with_the_replay_notice(
    client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger, app: Flask
) -> None:
    add_to_cart(client)
    fields = checkout_fields(client)  # the form as the browser holds it: the back button, then Pay again
    first = pay_in_browser(client, fields, GOOD_CARD)
    assert first.status_code == 303 and first.headers["Location"].startswith("/orders/ord_")
    purge_every_completed_record(app, runner)
    late = pay_in_browser(client, fields, GOOD_CARD)
    assert (late.status_code, late.headers["Location"]) == (303, first.headers["Location"])
    page = client.get(first.headers["Location"]).get_data(as_text=True)
    assert 'data-testid="replay-notice"' in page
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
