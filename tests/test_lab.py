"""The lab: the ledger JSON, the damage table, the unsafe checkout, and the switch that turns it all off."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.helpers import ALICE, SLOW_CARD, add_to_cart, checkout_fields, form_fields, order_body


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


def test_a_double_submit_on_the_unsafe_checkout_charges_twice_and_the_lab_shows_it(client: FlaskClient) -> None:
    add_to_cart(client)
    fields = checkout_fields(client)  # for the CSRF token
    form = {"csrf_token": fields["csrf_token"], "email": "s@example.com", "card_number": "4242424242424242"}
    cookie = client.get_cookie("session")
    assert cookie is not None
    assert client.post("/lab/unsafe-checkout", data=form).status_code == 303
    client.set_cookie("session", cookie.value)  # the second click left with the same cookie as the first
    assert client.post("/lab/unsafe-checkout", data=form).status_code == 303
    ledger = client.get("/api/lab/ledger").get_json()
    assert len(ledger["orders"]) == 2 and len(ledger["charges"]) == 2
    assert all(o["idempotency_key"] is None for o in ledger["orders"])
    assert 'data-testid="charged-twice">$14.00<' in client.get("/lab").get_data(as_text=True)


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
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/p.db", "SECRET_KEY": "k", "CHECKOUT_LAB": True})
    assert app.config["CHECKOUT_LAB"] is False
    assert app.test_client().get("/api/lab/ledger").status_code == 404
