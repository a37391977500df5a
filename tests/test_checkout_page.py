"""The browser checkout, through the test client: the key in the form, replays, stale forms, declines."""

from __future__ import annotations

import re
import uuid

from flask.testing import FlaskClient

from tests.helpers import (
    DECLINED_CARD,
    Ledger,
    add_to_cart,
    checkout_fields,
    checkout_with_a_mug,
    form_fields,
    pay_in_browser,
    session_cookie,
)


def test_checkout_renders_a_uuid4_key_csrf_and_the_pay_button(client: FlaskClient) -> None:
    add_to_cart(client)
    page = client.get("/checkout").get_data(as_text=True)
    fields = form_fields(page)
    assert uuid.UUID(fields["idempotency_key"]).version == 4
    assert fields["csrf_token"]
    assert re.search(r'data-testid="pay-button"[^>]*>Pay \$14\.00<', page)
    assert '<label for="email">' in page and '<label for="card_number">' in page


def test_a_refused_cart_form_says_which_of_its_fields_was_wrong(client: FlaskClient) -> None:
    csrf = form_fields(client.get("/").get_data(as_text=True), form_id=None)["csrf_token"]
    no_product = client.post("/cart/items", data={"csrf_token": csrf, "sku": "", "quantity": "1"})
    too_many = client.post("/cart/items", data={"csrf_token": csrf, "sku": "MUG-01", "quantity": "100"})
    assert no_product.status_code == too_many.status_code == 422
    assert "That is not a product." in no_product.get_data(as_text=True)
    assert "Choose a quantity from 1 to 99." in too_many.get_data(as_text=True)


def test_reloading_checkout_renders_the_same_key_and_a_changed_cart_a_new_one(client: FlaskClient) -> None:
    add_to_cart(client)
    first = checkout_fields(client)["idempotency_key"]
    assert checkout_fields(client)["idempotency_key"] == first
    add_to_cart(client, "TEE-01")
    assert checkout_fields(client)["idempotency_key"] != first


def test_paying_redirects_303_to_the_paid_order_and_empties_the_cart(client: FlaskClient, ledger: Ledger) -> None:
    add_to_cart(client)
    response = pay_in_browser(client, checkout_fields(client))
    assert response.status_code == 303
    [order] = ledger.orders()
    assert response.headers["Location"] == f"/orders/{order.public_id}"
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    assert f'data-testid="order-id">{order.public_id}<' in page
    assert 'data-testid="order-status">paid<' in page
    assert 'data-testid="replay-notice"' not in page
    assert 'data-testid="cart-count">0<' in page
    assert order.status == "paid" and order.card_last4 == "4242"


def test_resubmitting_the_same_form_shows_the_same_order_with_the_replay_notice(
    client: FlaskClient, ledger: Ledger
) -> None:
    fields = checkout_with_a_mug(client)
    first = pay_in_browser(client, fields)
    again = pay_in_browser(client, fields)  # the back button, then Pay: the cart is empty by now
    assert again.status_code == 303
    assert again.headers["Location"] == first.headers["Location"]
    page = client.get(again.headers["Location"]).get_data(as_text=True)
    assert 'data-testid="replay-notice"' in page
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


def test_a_form_for_a_cart_that_changed_gets_the_out_of_date_page(client: FlaskClient, ledger: Ledger) -> None:
    stale = checkout_with_a_mug(client)
    add_to_cart(client, "TEE-01")
    response = pay_in_browser(client, stale)
    assert response.status_code == 422
    assert "out of date" in response.get_data(as_text=True)
    assert ledger.orders() == [] and ledger.charges() == [] and ledger.records() == []


def test_a_form_for_a_cart_emptied_since_gets_the_out_of_date_page(client: FlaskClient, ledger: Ledger) -> None:
    stale = checkout_with_a_mug(client)
    client.post("/cart/items/MUG-01/delete", data={"csrf_token": stale["csrf_token"]})
    response = pay_in_browser(client, stale)
    assert response.status_code == 422
    assert "out of date" in response.get_data(as_text=True) and "Your cart is empty." in response.get_data(as_text=True)
    assert ledger.orders() == [] and ledger.charges() == [] and ledger.records() == []


def test_a_declined_card_offers_another_try_with_a_new_key(client: FlaskClient, ledger: Ledger) -> None:
    fields = checkout_with_a_mug(client)
    declined = pay_in_browser(client, fields, card=DECLINED_CARD)
    assert declined.status_code == 402
    page = declined.get_data(as_text=True)
    assert 'data-testid="error-message"' in page and "declined" in page
    retry_fields = form_fields(page)
    assert retry_fields["idempotency_key"] != fields["idempotency_key"]
    # The declined attempt stays final under its own key.
    assert pay_in_browser(client, fields, card=DECLINED_CARD).status_code == 402
    assert checkout_fields(client)["idempotency_key"] == retry_fields["idempotency_key"]
    paid = pay_in_browser(client, retry_fields)
    assert paid.status_code == 303
    assert sorted(o.status for o in ledger.orders()) == ["declined", "paid"]
    assert len(ledger.succeeded_charges()) == 1


def test_invalid_fields_show_their_errors_and_keep_the_key(client: FlaskClient, ledger: Ledger) -> None:
    fields = checkout_with_a_mug(client)
    response = pay_in_browser(client, fields, card="1234 5678", email="nope")
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    assert page.count('data-testid="error-message"') == 2
    assert form_fields(page)["idempotency_key"] == fields["idempotency_key"]
    assert ledger.records() == []


def test_a_post_without_csrf_token_is_refused(client: FlaskClient, ledger: Ledger) -> None:
    fields = checkout_with_a_mug(client)
    del fields["csrf_token"]
    response = pay_in_browser(client, fields)
    assert response.status_code == 400
    assert ledger.orders() == []


def test_a_lost_answer_then_reloading_checkout_shows_the_paid_order_and_pay_replays(
    client: FlaskClient, ledger: Ledger
) -> None:
    fields = checkout_with_a_mug(client)
    cookie = session_cookie(client)
    pay_in_browser(client, fields)
    client.set_cookie("session", cookie)  # the answer, and its cookie, never arrived
    page = client.get("/checkout").get_data(as_text=True)
    assert 'data-testid="already-paid"' in page
    assert form_fields(page)["idempotency_key"] == fields["idempotency_key"]
    again = pay_in_browser(client, form_fields(page))
    [order] = ledger.orders()
    assert again.headers["Location"] == f"/orders/{order.public_id}"
    assert 'data-testid="replay-notice"' in client.get(again.headers["Location"]).get_data(as_text=True)
    assert len(ledger.succeeded_charges()) == 1


def test_orders_are_private_to_their_browser(app, client: FlaskClient) -> None:
    add_to_cart(client)
    location = pay_in_browser(client, checkout_fields(client)).headers["Location"]
    stranger = app.test_client()
    assert stranger.get(location).status_code == 404
    assert location.split("/")[-1] not in stranger.get("/orders").get_data(as_text=True)
    assert location.split("/")[-1] in client.get("/orders").get_data(as_text=True)


def test_pages_render_and_static_files_are_served(client: FlaskClient) -> None:
    assert "Add to cart" in client.get("/").get_data(as_text=True)
    with client.get("/static/style.css") as css, client.get("/static/checkout.js") as script:
        assert css.status_code == 200
        assert b"disabled" in script.get_data()
    assert client.get("/orders").status_code == 200
    assert client.get("/checkout").status_code == 302  # empty cart: back to the cart


def test_a_cart_paid_and_refunded_since_is_still_shown_as_paid_not_offered_again(
    client: FlaskClient, ledger: Ledger
) -> None:
    fields = checkout_with_a_mug(client)
    cookie = session_cookie(client)
    order_url = pay_in_browser(client, fields).headers["Location"]
    refund_fields = form_fields(client.get(order_url).get_data(as_text=True), form_id="refund-form")
    assert client.post(f"{order_url}/refunds", data=refund_fields).status_code == 303  # all of it
    [order] = ledger.orders()
    assert order.status == "refunded"
    client.set_cookie("session", cookie)  # the payment's answer never arrived
    page = client.get("/checkout").get_data(as_text=True)
    assert 'data-testid="already-paid"' in page
    again = pay_in_browser(client, form_fields(page))
    assert again.headers["Location"] == order_url
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
