"""Nothing that pays is trusted from the cookie: weak secrets are refused in production, the
server re-checks every line at checkout, and the gateway refuses an amount of zero or less."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout import create_app
from checkout.config import settings
from checkout.extensions import db
from checkout.gateway import GatewayError
from checkout.shop.models import Product
from checkout.shop.payment import gateway
from tests.helpers import GOOD_CARD, Ledger, add_to_cart, checkout_fields, checkout_with_a_mug, form_fields

STRONG_SECRET = "3f9c1e7a0b5d4c2e8f6a1b3c5d7e9f0a2b4c6d8e0f1a3b5c"


@pytest.mark.parametrize("secret", ["change-me", "x", "secret", "development", "a" * 40, "0123456789abcdef"])
def test_production_refuses_a_weak_secret_key_with_a_clear_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, secret: str
) -> None:
    monkeypatch.setenv("CHECKOUT_ENV", "production")
    monkeypatch.setenv("SECRET_KEY", secret)
    with pytest.raises(ValueError, match="SECRET_KEY"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db"})


def test_production_starts_with_a_strong_secret_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CHECKOUT_ENV", "production")
    monkeypatch.setenv("SECRET_KEY", STRONG_SECRET)
    monkeypatch.setenv("CHECKOUT_FINGERPRINT_SECRET", STRONG_SECRET[::-1])
    monkeypatch.setenv("CHECKOUT_WEBHOOK_SECRET", "e" + STRONG_SECRET[1:][::-1])
    monkeypatch.setenv("CHECKOUT_TRUSTED_HOSTS", "shop.example")
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db"})
    assert settings(app).env == "production"


def forge_session(app: Flask, client: FlaskClient, **values: object) -> None:
    """Sign a session of our own making with the app's secret (an attacker who guessed it)."""
    with client.session_transaction() as real:
        current = dict(real)
    forged = app.session_interface.get_signing_serializer(app).dumps({**current, **values})  # type: ignore[attr-defined]
    client.set_cookie("session", forged)


def test_a_session_forged_to_name_another_shoppers_cart_never_sees_or_pays_it(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    # The cookie holds only the cart's id, never its lines; the shop takes that id only for the cart of the
    # customer the same cookie names. Here one shopper's cookie is re-signed to name another's cart.
    other = app.test_client()
    add_to_cart(other, "STK-01")
    theirs = checkout_fields(other)  # their checkout form, as if it leaked
    with other.session_transaction() as their_session:
        their_cart = their_session["cart"]
    add_to_cart(client)  # a real session first: its own customer, cart and CSRF token
    forge_session(app, client, cart=their_cart)
    assert client.get("/checkout").status_code == 302  # no cart of its own: sent to the (empty) cart page
    assert "STK-01" not in client.get("/cart").get_data(as_text=True)
    paid = client.post("/checkout", data={**theirs, "csrf_token": checkout_csrf(client), "email": "s@example.com",
                                          "card_number": GOOD_CARD})  # fmt: skip
    assert paid.status_code in (302, 303, 422)
    assert ledger.orders() == [] and ledger.charges() == []


def checkout_csrf(client: FlaskClient) -> str:
    return form_fields(client.get("/").get_data(as_text=True), form_id=None)["csrf_token"]


def test_the_checkout_charges_todays_price_and_a_form_shown_at_an_older_price_is_out_of_date(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    stale = checkout_with_a_mug(client)
    with app.app_context():
        db.session.execute(sa.update(Product).where(Product.sku == "MUG-01").values(price_cents=1500))
        db.session.commit()
    response = client.post("/checkout", data={**stale, "email": "s@example.com", "card_number": GOOD_CARD})
    assert response.status_code == 422
    assert ledger.orders() == [] and ledger.charges() == []
    fresh = checkout_fields(client)
    assert (
        client.post("/checkout", data={**fresh, "email": "s@example.com", "card_number": GOOD_CARD}).status_code == 303
    )
    [order] = ledger.orders()
    assert order.total_cents == 1500
    assert [c.amount_cents for c in ledger.succeeded_charges()] == [1500]


@pytest.mark.parametrize("amount", [0, -4800])
def test_the_gateway_refuses_an_amount_of_zero_or_less(app: Flask, ledger: Ledger, amount: int) -> None:
    with app.app_context(), pytest.raises(GatewayError):
        gateway().charge(
            gateway_key="gk-negative", amount_cents=amount, currency="USD", card_number=GOOD_CARD, reference="ord_x"
        )
    assert ledger.charges() == []
