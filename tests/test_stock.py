"""Stock: taken in the order's own transaction, never below zero, given back once when an order ends unpaid.

The invariant, for every product: seeded stock = stock now + the quantities of
its orders that hold stock (pending, paid, partially refunded, refunded)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner
from sqlalchemy.exc import IntegrityError

from checkout.database import writing
from checkout.shop.models import Product
from tests.helpers import (
    ALICE,
    BOB,
    DECLINED_CARD,
    SLOW_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    add_to_cart,
    checkout_fields,
    order_body,
    post_order,
    race,
    reconcile_the_abandoned,
    stock_of,
    stock_out_of_balance,
)


def assert_stock_invariant(app: Flask) -> None:
    """Every product's seeded stock is its stock now plus what its orders hold."""
    assert stock_out_of_balance(app) == {}


def test_an_order_takes_its_stock_and_a_decline_gives_it_back(app: Flask, client: FlaskClient) -> None:
    before = stock_of(app, "MUG-01")
    assert post_order(client, str(uuid.uuid4())).status_code == 201
    assert stock_of(app, "MUG-01") == before - 2
    assert post_order(client, str(uuid.uuid4()), order_body(card=DECLINED_CARD)).status_code == 402
    assert stock_of(app, "MUG-01") == before - 2  # the declined order gave its two mugs back
    assert_stock_invariant(app)


def test_an_abandoned_payment_ended_by_reconcile_gives_its_stock_back_once(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner
) -> None:
    before = stock_of(app, "MUG-01")
    key = str(uuid.uuid4())
    assert post_order(client, key, order_body(card=UNAVAILABLE_CARD)).status_code == 503
    assert stock_of(app, "MUG-01") == before - 2  # pending: still held
    assert "failed" in reconcile_the_abandoned(app, runner)
    runner.invoke(args=["idempotency", "reconcile"])  # again: nothing more to give back
    assert stock_of(app, "MUG-01") == before
    assert_stock_invariant(app)


def test_not_enough_stock_is_422_out_of_stock_listing_the_skus_stored_under_the_key(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    body = order_body(items=[{"sku": "LAST-01", "quantity": 2}, {"sku": "MUG-01", "quantity": 1}])
    first = post_order(client, key, body)
    assert first.status_code == 422
    assert (first.get_json()["type"], first.get_json()["skus"]) == ("out-of-stock", ["LAST-01"])
    again = post_order(client, key, body)
    assert again.get_data() == first.get_data() and again.headers["Idempotent-Replayed"] == "true"
    assert ledger.orders() == [] and ledger.charges() == []
    assert stock_of(app, "LAST-01") == 1 and stock_of(app, "MUG-01") == 100_000  # nothing was taken
    assert_stock_invariant(app)


@pytest.mark.slow
def test_two_customers_racing_for_the_last_item_one_gets_it_the_other_out_of_stock(app: Flask, ledger: Ledger) -> None:
    body = order_body(card=SLOW_CARD, items=[{"sku": "LAST-01", "quantity": 1}])
    tokens = [ALICE, BOB]
    answers = race(
        2,
        lambda i: app.test_client().post(
            "/api/orders", json=body, headers={**tokens[i], "Idempotency-Key": str(uuid.uuid4())}
        ),
    )
    assert sorted(a.status_code for a in answers) == [201, 422]
    loser = next(a for a in answers if a.status_code == 422)
    assert loser.get_json()["type"] == "out-of-stock"
    assert stock_of(app, "LAST-01") == 0
    assert len(ledger.succeeded_charges()) == 1
    assert_stock_invariant(app)


def test_the_database_never_lets_stock_go_below_zero(app: Flask) -> None:
    with app.app_context(), pytest.raises(IntegrityError), writing() as tx:
        tx.execute(sa.update(Product).where(Product.sku == "LAST-01").values(stock=-1))


def test_a_browser_that_lost_the_race_is_told_and_its_next_try_gets_a_new_key(app: Flask, client: FlaskClient) -> None:
    add_to_cart(client, "LAST-01")
    fields = checkout_fields(client)
    assert (
        post_order(
            client.application.test_client(),
            str(uuid.uuid4()),
            order_body(items=[{"sku": "LAST-01", "quantity": 1}], card="4242424242424242"),
            headers=BOB,
        ).status_code
        == 201
    )  # someone else bought it meanwhile
    response = client.post("/checkout", data={**fields, "email": "s@example.com", "card_number": "4242424242424242"})
    assert response.status_code == 422
    assert "Last-One Lamp sold out" in response.get_data(as_text=True)
    assert checkout_fields(client)["idempotency_key"] != fields["idempotency_key"]


def test_the_seed_keeps_todays_stock_and_reset_restores_it_keeping_the_invariant(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner
) -> None:
    assert post_order(client, str(uuid.uuid4())).status_code == 201
    runner.invoke(args=["seed"])
    assert stock_of(app, "MUG-01") == 100_000 - 2
    assert "reset" in runner.invoke(args=["seed", "--reset"]).output
    assert stock_of(app, "MUG-01") == 100_000 and stock_of(app, "LAST-01") == 1
    assert_stock_invariant(app)


def test_the_catalog_shows_what_is_left_and_refuses_what_is_sold_out(app: Flask, client: FlaskClient) -> None:
    page = client.get("/").get_data(as_text=True)
    assert "Only 1 left" in page
    assert (
        post_order(client, str(uuid.uuid4()), order_body(items=[{"sku": "LAST-01", "quantity": 1}])).status_code == 201
    )
    page = client.get("/").get_data(as_text=True)
    assert 'data-testid="stock-LAST-01">Sold out<' in page
