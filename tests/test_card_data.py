"""Card data: never echoed into a page, never cached, and the stored fingerprint is keyed by a
secret of its own that only the shop's user can read."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from checkout import create_app
from checkout.config import settings
from checkout.extensions import db
from checkout.idempotency import fingerprint
from checkout.shop.schemas import parse_order
from tests.helpers import UNAVAILABLE_CARD, Ledger, add_to_cart, checkout_fields, form_fields, order_body, post_order


@pytest.mark.parametrize(
    ("card", "email", "status"),
    [(UNAVAILABLE_CARD, "s@example.com", 503), (UNAVAILABLE_CARD, "not an email", 422)],
    ids=["gateway down", "invalid email"],
)
def test_a_checkout_page_shown_again_never_echoes_the_card_number_and_is_not_cached(
    client: FlaskClient, card: str, email: str, status: int
) -> None:
    add_to_cart(client)
    response = client.post("/checkout", data={**checkout_fields(client), "email": email, "card_number": card})
    assert response.status_code == status
    page = response.get_data(as_text=True)
    assert form_fields(page)["card_number"] == ""
    assert 'value="4000000000000119"' not in page and f'value="{card}"' not in page
    assert "no-store" in response.headers["Cache-Control"]


def test_the_fingerprint_is_keyed_by_its_own_secret_not_the_session_secret(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    assert post_order(client, "fingerprint-secret-0001").status_code == 201
    [record] = ledger.records()
    body = parse_order(order_body()).normalized()

    def keyed_by(secret: str) -> str:
        return fingerprint(secret, "POST", "POST /api/orders", body)

    assert record.fingerprint == keyed_by(settings(app).fingerprint_secret)
    assert record.fingerprint != keyed_by(app.config["SECRET_KEY"])


def test_in_development_secrets_and_the_database_are_readable_by_the_owner_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("SECRET_KEY", "DATABASE_URL", "CHECKOUT_FINGERPRINT_SECRET", "CHECKOUT_ENV"):
        monkeypatch.delenv(name, raising=False)
    instance = tmp_path / "instance"
    app = create_app(instance_path=str(instance))
    with app.app_context():
        db.create_all()
        db.engine.dispose()
    assert stat.S_IMODE(instance.stat().st_mode) == 0o700
    for name in ("secret_key", "fingerprint_secret", "checkout.sqlite3"):
        mode = stat.S_IMODE((instance / name).stat().st_mode)
        assert mode == 0o600, f"{name} is {oct(mode)}"
