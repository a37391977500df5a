"""What a production shop tells the world: no demo token, no test card in its OpenAPI document,
and HSTS on every answer it gives over HTTPS (never over plain http, never in development)."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from openapi_spec_validator import validate

from checkout import create_app
from checkout.database import writing
from checkout.extensions import db
from checkout.shop.seed import seed
from tests.helpers import add_to_cart

STRONG = "7d1f3b5a9c0e2d4f6a8b1c3e5f7a9b0d2c4e6f8a1b3d5c7e"


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Any:
    monkeypatch.setenv("CHECKOUT_ENV", "production")
    monkeypatch.setenv("SECRET_KEY", STRONG)
    monkeypatch.setenv("CHECKOUT_FINGERPRINT_SECRET", STRONG[::-1])
    monkeypatch.setenv("CHECKOUT_WEBHOOK_SECRET", "e" + STRONG[1:][::-1])
    monkeypatch.setenv("CHECKOUT_TRUSTED_HOSTS", "localhost")  # the test client's Host
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/production.sqlite3"})
    with app.app_context():
        db.create_all()
    yield app
    with app.app_context():
        db.engine.dispose()


def test_the_production_openapi_document_names_no_demo_token_and_no_test_card(production: Flask) -> None:
    response = production.test_client().get("/api/openapi.json")
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert "demo-alice-token" not in text and "demo-bob-token" not in text
    assert "4242" not in text and "4000 0000" not in text
    validate(response.get_json())  # still a valid OpenAPI 3.1 document


def test_the_development_openapi_document_still_names_the_demo_token_and_the_test_cards(client: FlaskClient) -> None:
    text = client.get("/api/openapi.json").get_data(as_text=True)
    assert "demo-alice-token" in text and "4242 4242 4242 4242" in text


def test_a_production_answer_over_https_carries_hsts(production: Flask) -> None:
    response = production.test_client().get("/", base_url="https://localhost")
    assert response.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    api = production.test_client().get("/api/openapi.json", base_url="https://localhost")
    assert "Strict-Transport-Security" in api.headers


def test_a_production_answer_over_plain_http_carries_no_hsts(production: Flask) -> None:
    assert "Strict-Transport-Security" not in production.test_client().get("/").headers


def test_a_development_answer_over_https_carries_no_hsts(client: FlaskClient) -> None:
    assert "Strict-Transport-Security" not in client.get("/", base_url="https://localhost").headers


def test_the_production_checkout_page_shows_no_test_cards(production: Flask) -> None:
    with production.app_context(), writing():
        seed(demo_customers=False)
    client = production.test_client()
    add_to_cart(client)
    page = client.get("/checkout", base_url="https://localhost").get_data(as_text=True)
    assert 'data-testid="pay-button"' in page
    assert "test-cards" not in page and "0000 0000 0119" not in page and "4242 4242" not in page


def test_the_development_checkout_page_lists_the_test_cards(client: FlaskClient) -> None:
    add_to_cart(client)
    page = client.get("/checkout").get_data(as_text=True)
    assert "test-cards" in page and "4000 0000 0000 0119" in page
