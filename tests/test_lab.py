"""The lab: the ledger JSON, the damage table, the unsafe checkout, and the switch that turns it all off."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from flask.testing import FlaskClient

from tests.conftest import LiveServer
from tests.helpers import ALICE, SLOW_CARD, add_to_cart, browser_with_cart, form_fields, order_body, race


def test_the_ledger_lists_records_orders_charges_and_events_newest_first(client: FlaskClient) -> None:
    first = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": "a" * 20}).get_json()
    second = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": "b" * 20}).get_json()
    ledger = client.get("/api/lab/ledger").get_json()
    assert [o["id"] for o in ledger["orders"]] == [second["id"], first["id"]]
    assert [r["key"] for r in ledger["records"]] == ["b" * 20, "a" * 20]
    assert set(ledger["records"][0]) >= {
        "customer",
        "endpoint",
        "key",
        "state",
        "recovery_point",
        "response_status",
        "created_at",
    }
    assert [c["order_id"] for c in ledger["charges"]] == [second["id"], first["id"]]
    assert {c["status"] for c in ledger["charges"]} == {"succeeded"}
    assert ledger["events"][0]["event"] == "completed"
    assert ledger["totals"] == {"charged_cents": 2 * 3300, "succeeded_charges": 2, "orders": 2}


def test_the_lab_counts_replays_and_shows_a_keys_timeline(client: FlaskClient) -> None:
    for _ in range(3):
        client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": "t" * 20})
    assert client.get("/api/lab/ledger").get_json()["counters"]["replays"] == 2
    page = client.get(f"/lab?key={'t' * 20}").get_data(as_text=True)
    assert 'data-testid="timeline"' in page
    assert page.count(">replayed<") >= 2 and ">charged<" in page


@pytest.mark.slow
def test_a_double_submit_on_the_unsafe_checkout_charges_twice_and_the_lab_shows_it(live_server: LiveServer) -> None:
    browser = browser_with_cart(live_server.url)
    fields = form_fields(browser.open(f"{live_server.url}/lab/unsafe-checkout").read().decode(), "unsafe-checkout-form")
    form = urlencode({**fields, "email": "s@example.com", "card_number": SLOW_CARD}).encode()
    race(2, lambda _i: browser.open(f"{live_server.url}/lab/unsafe-checkout", data=form).read())  # both in flight
    ledger = json.loads(browser.open(f"{live_server.url}/api/lab/ledger").read())
    assert len(ledger["orders"]) == 2
    assert len([c for c in ledger["charges"] if c["status"] == "succeeded"]) == 2
    assert all(o["idempotency_key"] is None for o in ledger["orders"])
    assert 'data-testid="charged-twice">$14.00<' in browser.open(f"{live_server.url}/lab").read().decode()


def test_the_safe_checkout_offers_the_unsafe_switch_while_the_lab_is_on(client: FlaskClient) -> None:
    add_to_cart(client)
    assert 'data-testid="unsafe-switch"' in client.get("/checkout").get_data(as_text=True)


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_LAB": False}])
def test_with_the_lab_off_the_unsafe_checkout_cannot_be_reached(
    client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    add_to_cart(client)
    assert 'data-testid="unsafe-switch"' not in client.get("/checkout").get_data(as_text=True)
    assert client.get("/lab/unsafe-checkout").status_code == 404
    csrf = form_fields(client.get("/").get_data(as_text=True), form_id=None)["csrf_token"]
    form = {"csrf_token": csrf, "email": "s@example.com", "card_number": "4242424242424242"}
    assert client.post("/lab/unsafe-checkout", data=form).status_code == 404  # a valid form, still no way in
    assert client.post("/api/lab/unsafe-orders", json=order_body(card=SLOW_CARD), headers=ALICE).status_code == 404
    assert client.get("/lab/exercises").status_code == 404


def test_production_turns_the_lab_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from checkout import create_app

    monkeypatch.setenv("CHECKOUT_ENV", "production")
    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db",
            "SECRET_KEY": "3f9c1e7a0b5d4c2e8f6a1b3c5d7e9f0a2b4c6d8e0f1a3b5c",
            "CHECKOUT_FINGERPRINT_SECRET": "c5b3a1f0e8d6c4b2a0f9e7d5c3b1a6f8e2c4d5b0a7e1c9f3",
            "CHECKOUT_LAB": True,
        }
    )
    assert app.config["CHECKOUT_LAB"] is False
    assert app.test_client().get("/api/lab/ledger").status_code == 404
