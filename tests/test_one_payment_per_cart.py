"""One cart version is paid once: the cart lives on the server, its key is made once in the
database, and orders are unique on (cart, cart version) behind the key.

And a shopper is never stuck: after a gateway error they can finish the old payment or pay
the changed cart, and are never told that an unpaid cart is paid."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

import pytest
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.shop.models import Order
from tests.conftest import LiveServer
from tests.helpers import (
    ANSWER_LOST_CARD,
    SLOW_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    add_to_cart,
    browser_at_checkout,
    browser_with_cart,
    checkout_fields,
    checkout_with_a_mug,
    form_fields,
    pay_in_browser,
    race,
    reconcile_the_abandoned,
    session_cookie,
)


@pytest.mark.slow
def test_two_tabs_opened_at_the_same_moment_render_the_same_key_and_paying_in_both_charges_once(
    live_server: LiveServer, ledger: Ledger
) -> None:
    browser = browser_with_cart(live_server.url)  # a mug in the cart; no checkout page opened yet
    pages = race(2, lambda _i: browser.open(f"{live_server.url}/checkout").read().decode())
    first, second = (form_fields(page) for page in pages)
    assert first["idempotency_key"] == second["idempotency_key"]

    forms = [
        urlencode({**fields, "email": "shopper@example.com", "card_number": SLOW_CARD}).encode()
        for fields in (first, second)
    ]
    race(2, lambda i: browser.open(f"{live_server.url}/checkout", data=forms[i]).read())
    assert len(ledger.orders()) == 1
    assert len(ledger.succeeded_charges()) == 1


@pytest.mark.slow
def test_two_different_keys_for_one_cart_version_end_in_one_order(live_server: LiveServer, ledger: Ledger) -> None:
    """A second tab with a forged key, or a forged form: the orders' unique (cart, version) holds."""
    browser, _form = browser_at_checkout(live_server.url)
    fields = form_fields(browser.open(f"{live_server.url}/checkout").read().decode())
    forged = {**fields, "idempotency_key": str(uuid.uuid4())}
    forms = [
        urlencode({**f, "email": "shopper@example.com", "card_number": SLOW_CARD}).encode() for f in (fields, forged)
    ]
    pages = race(2, lambda i: browser.open(f"{live_server.url}/checkout", data=forms[i]).read().decode())
    [order] = ledger.orders()
    assert len(ledger.succeeded_charges()) == 1
    assert any(f'data-testid="order-id">{order.public_id}<' in page for page in pages)


def test_a_second_key_for_a_paid_cart_version_ends_on_that_order_and_charges_nothing(
    client: FlaskClient, ledger: Ledger
) -> None:
    """A second tab's key, or a forged one, sent after the cart version was paid: the same order."""
    fields = checkout_with_a_mug(client)
    paid = pay_in_browser(client, fields)
    assert paid.status_code == 303
    again = pay_in_browser(client, {**fields, "idempotency_key": str(uuid.uuid4())})
    assert again.status_code == 303 and again.headers["Location"] == paid.headers["Location"]
    assert 'data-testid="replay-notice"' in client.get(again.headers["Location"]).get_data(as_text=True)
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


def test_a_session_cookie_saved_before_checkout_cannot_bring_a_paid_cart_back(
    client: FlaskClient, ledger: Ledger
) -> None:
    add_to_cart(client)
    saved = session_cookie(client)
    assert pay_in_browser(client, checkout_fields(client)).status_code == 303
    client.set_cookie("session", saved)  # the cookie from before the payment, sent again
    page = client.get("/checkout")
    if page.status_code == 200:  # whatever the checkout now offers, paying it must not charge again
        pay_in_browser(client, form_fields(page.get_data(as_text=True)))
    assert len(ledger.orders()) == 1
    assert len(ledger.succeeded_charges()) == 1


def unanswered_then_the_cart_changed(client: FlaskClient, card: str) -> dict[str, str]:
    """A mug paid with ``card``, answered 503 (its order left pending), then the shopper adds a T-shirt to the
    cart: the fields of the form that paid."""
    fields = checkout_with_a_mug(client)
    assert pay_in_browser(client, fields, card=card).status_code == 503
    add_to_cart(client, "TEE-01")
    return fields


def test_after_the_gateway_was_down_a_changed_cart_gets_a_new_key_and_can_be_paid(
    client: FlaskClient, ledger: Ledger
) -> None:
    first = unanswered_then_the_cart_changed(client, UNAVAILABLE_CARD)
    second = checkout_fields(client)
    assert second["idempotency_key"] != first["idempotency_key"]
    paid = pay_in_browser(client, second)
    assert paid.status_code == 303
    [new] = ledger.orders(Order.idempotency_key == second["idempotency_key"])
    assert new.status == "paid" and new.total_cents == 1400 + 2400
    assert len(ledger.succeeded_charges()) == 1


def test_the_unfinished_earlier_payment_can_still_be_finished_from_its_order_page(
    client: FlaskClient, ledger: Ledger
) -> None:
    first = unanswered_then_the_cart_changed(client, UNAVAILABLE_CARD)
    [pending] = ledger.orders()
    page = client.get(f"/orders/{pending.public_id}").get_data(as_text=True)
    assert 'data-testid="finish-payment"' in page
    fields = form_fields(page, form_id="finish-payment-form")
    assert fields["idempotency_key"] == first["idempotency_key"]
    finished = client.post("/checkout", data={**fields, "card_number": UNAVAILABLE_CARD})
    assert finished.status_code == 303
    assert finished.headers["Location"] == f"/orders/{pending.public_id}"
    [order] = ledger.orders()
    assert order.status == "paid" and len(ledger.succeeded_charges()) == 1
    # The changed cart is still there to be paid (or emptied) by the shopper.
    assert 'data-testid="cart-count">2<' in client.get("/cart").get_data(as_text=True)


def test_an_earlier_payment_finished_by_reconcile_never_marks_the_changed_cart_paid(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    unanswered_then_the_cart_changed(client, ANSWER_LOST_CARD)
    assert "paid" in reconcile_the_abandoned(app, runner)
    [earlier] = ledger.orders()
    assert earlier.status == "paid"

    page = client.get("/checkout").get_data(as_text=True)
    assert 'data-testid="already-paid"' not in page  # the cart as it is now was never paid
    assert 'data-testid="earlier-payment"' in page and earlier.public_id in page
    paid = pay_in_browser(client, form_fields(page))
    assert paid.status_code == 303
    assert sorted(o.total_cents for o in ledger.orders() if o.status == "paid") == [1400, 1400 + 2400]
    assert len(ledger.succeeded_charges()) == 2
