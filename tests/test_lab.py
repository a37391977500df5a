"""The lab: the ledger JSON, the damage table, the unsafe checkout, and the switch that turns it all off."""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any
from urllib.parse import urlencode

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout.audit import IdempotencyEvent
from checkout.config import settings
from checkout.database import writing
from checkout.extensions import db
from checkout.shop.models import Cart, Order
from tests.conftest import LiveServer
from tests.helpers import (
    ALICE,
    BOB,
    SLOW_CARD,
    Ledger,
    add_to_cart,
    bought,
    browser_with_cart,
    checkout_fields,
    checkout_with_a_mug,
    form_fields,
    order_body,
    pay_in_browser,
    post_order,
    race,
)
from tests.payments import payment_body, post_payment


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
    assert len({o["idempotency_key"] for o in ledger["orders"]}) == 2  # no client key: each its own
    assert 'data-testid="charged-more-than-once">$14.00<' in browser.open(f"{live_server.url}/lab").read().decode()


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
            "CHECKOUT_WEBHOOK_SECRET": "9e7d5c3b1a6f8e2c4d5b0a7e1c9f3c5b3a1f0e8d6c4b2a0f",
            "CHECKOUT_LAB": True,
            "CHECKOUT_TRUSTED_HOSTS": "localhost",  # the test client's Host
        }
    )
    assert settings(app).lab is False
    assert app.test_client().get("/api/lab/ledger").status_code == 404


@pytest.mark.slow
def test_the_damage_table_counts_the_wrong_way_clients_extra_charges_exactly_per_purchase(
    live_server: LiveServer,
) -> None:
    from checkout import client as retry_client

    body, token = order_body(card="4000 0000 0000 0259"), "demo-alice-token"
    wrong = retry_client.place_order(
        live_server.url, token, body, purchase="wrong-way-purchase-1", wrong_way=True, max_attempts=4,
        base_delay=0.01, max_delay=0.02,
    )  # fmt: skip
    right = retry_client.place_order(live_server.url, token, body, purchase="right-way-purchase-1", base_delay=0.01)
    assert [a.status for a in wrong.attempts] == [503, 503, 503, 503]  # every new key is a new charge, lost again
    assert right.status == 201
    price = 2 * 1400 + 500

    def damage(prefix: str) -> dict[str, Any]:
        return json.loads(urllib.request.urlopen(f"{live_server.url}/api/lab/damage?purchase_prefix={prefix}").read())

    wrong_way = damage("wrong-way-")["totals"]
    assert wrong_way["purchases"] == 1
    assert wrong_way["charged_cents"] == 4 * price
    assert wrong_way["charged_more_than_once_cents"] == 3 * price
    assert damage("right-way-")["totals"] == {
        "purchases": 1,
        "ordered_cents": price,
        "charged_cents": price,
        "charged_more_than_once_cents": 0,
        "never_charged_cents": 0,
        "exact": True,
    }


def test_a_browser_order_is_counted_under_its_cart_version_and_an_api_order_under_its_purchase_header(
    client: FlaskClient, ledger: Ledger
) -> None:
    """The shop names no purchase: the lab reads it from the request that placed the order."""
    add_to_cart(client)
    assert pay_in_browser(client, checkout_fields(client)).status_code == 303
    assert post_order(client, "a-purchase-header-key-1", headers=bought("named-by-the-client")).status_code == 201
    assert post_order(client, "a-malformed-purchase-key-1", headers=bought("two words")).status_code == 201
    browser, named, malformed = sorted(ledger.orders(), key=lambda order: order.id)
    [cart_public_id] = ledger.rows(Cart.public_id, Cart.id == browser.cart_id)
    assert browser.purchase_ref == f"{cart_public_id}:v{browser.cart_version}"
    assert (named.purchase_ref, malformed.purchase_ref) == ("named-by-the-client", None)  # a purchase of its own
    assert {order.path for order in (browser, named, malformed)} == {"safe"}


def test_a_client_that_still_sends_purchase_in_its_body_pays_and_its_order_is_a_purchase_of_its_own(
    client: FlaskClient, ledger: Ledger
) -> None:
    """The field went to a header; the body's extra field is ignored, as any other extra field is."""
    body = {**order_body(), "purchase": "in-the-body-1"}
    assert post_order(client, "purchase-in-the-body-key-1", body).status_code == 201
    [order] = ledger.orders()
    assert order.purchase_ref is None


def test_a_purchase_the_client_gave_up_on_is_counted_as_never_charged(client: FlaskClient) -> None:
    key = "abandoned-purchase-key-1"
    headers = {**ALICE, "Idempotency-Key": key, **bought("given-up-1")}
    assert client.post("/api/orders", json=order_body(card="4000 0000 0000 0119"), headers=headers).status_code == 503
    totals = client.get("/api/lab/damage?purchase_prefix=given-up-").get_json()["totals"]
    assert (totals["ordered_cents"], totals["charged_cents"], totals["never_charged_cents"]) == (3300, 0, 3300)


def test_a_purchase_whose_order_failed_uncharged_is_no_damage(app: Flask, client: FlaskClient) -> None:
    """Exercise 5, killed before the charge: reconcile ends the order failed, nothing charged, and the shopper is
    told so. A correct outcome, like a decline: nothing ordered is left unpaid."""
    headers = {**ALICE, "Idempotency-Key": "failed-purchase-key-1", **bought("failed-1")}
    assert client.post("/api/orders", json=order_body(card="4000 0000 0000 0119"), headers=headers).status_code == 503
    with app.app_context(), writing():
        db.session.execute(sa.update(Order).values(status="failed"))  # as reconcile ends it, the gateway fenced
    totals = client.get("/api/lab/damage?purchase_prefix=failed-").get_json()["totals"]
    assert (totals["ordered_cents"], totals["charged_cents"], totals["never_charged_cents"]) == (0, 0, 0)
    assert totals["exact"] is True


def test_the_lab_leads_with_this_browsers_latest_payment_and_the_time_between_its_steps(client: FlaskClient) -> None:
    fields = checkout_with_a_mug(client)
    client.post("/checkout", data={**fields, "email": "s@example.com", "card_number": "4242424242424242"})
    other = client.application.test_client()  # another browser's payment comes later
    add_to_cart(other)
    other.post(
        "/checkout", data={**checkout_fields(other), "email": "o@example.com", "card_number": "4242424242424242"}
    )
    page = client.get("/lab").get_data(as_text=True)
    focus = page[page.index('data-testid="focus"') :]
    assert "Your latest payment" in focus
    assert fields["idempotency_key"][:13] in focus[:600]
    assert "+0" in focus  # each step says how long after the one before it came
    assert 'http-equiv="refresh"' not in page


def test_the_lab_updates_in_place_from_its_live_part(client: FlaskClient) -> None:
    post_order_as_alice = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": "l" * 20})
    assert post_order_as_alice.status_code == 201
    live = client.get("/lab/live")
    assert live.status_code == 200
    html = live.get_data(as_text=True)
    assert "<html" not in html and 'data-testid="damage"' in html and 'data-testid="counter-replays"' in html
    assert 'data-live-url="/lab/live"' in client.get("/lab").get_data(as_text=True)


def test_the_lab_explains_each_counter(client: FlaskClient) -> None:
    page = client.get("/lab").get_data(as_text=True)
    for meaning in ("stored answer back", "while the first request was still running", "different body"):
        assert meaning in page


def test_the_button_guard_switch_is_for_this_browser_only(client: FlaskClient) -> None:
    add_to_cart(client)
    assert 'data-button-guard="on"' in client.get("/checkout").get_data(as_text=True)
    token = form_fields(client.get("/lab").get_data(as_text=True), form_id=None)["csrf_token"]
    assert client.post("/lab/button-guard", data={"csrf_token": token, "guard": "off"}).status_code == 303
    assert 'data-button-guard="off"' in client.get("/checkout").get_data(as_text=True)
    other = client.application.test_client()
    add_to_cart(other)
    assert 'data-button-guard="on"' in other.get("/checkout").get_data(as_text=True)
    client.post("/lab/button-guard", data={"csrf_token": token, "guard": "on"})
    assert 'data-button-guard="on"' in client.get("/checkout").get_data(as_text=True)


def test_reconcile_now_in_the_lab_finishes_an_abandoned_payment(app: Any, client: FlaskClient) -> None:
    from tests.helpers import Ledger, age_every_record

    fields = checkout_with_a_mug(client)
    client.post("/checkout", data={**fields, "email": "s@example.com", "card_number": "4000 0000 0000 0259"})
    age_every_record(app)
    token = form_fields(client.get("/lab").get_data(as_text=True), form_id=None)["csrf_token"]
    done = client.post("/lab/reconcile", data={"csrf_token": token}, follow_redirects=True)
    assert "Reconcile finished" in done.get_data(as_text=True) and "paid" in done.get_data(as_text=True)
    [order] = Ledger(app).orders()
    assert order.status == "paid"


def test_the_kill_button_says_why_it_will_not_kill_a_single_process_shop(app: Any, client: FlaskClient) -> None:
    from tests.helpers import claim_as_a_dying_worker

    token = form_fields(client.get("/").get_data(as_text=True), form_id=None)["csrf_token"]
    nothing = client.post("/lab/kill-worker", data={"csrf_token": token, "key": "x" * 20}, follow_redirects=True)
    assert "no payment with that key" in nothing.get_data(as_text=True)
    with client.session_transaction() as session:
        session["customer"] = "cus_demo_alice"  # this browser is alice, whose API payment is running
    claim_as_a_dying_worker(app, "running-key-000000001")
    from checkout.extensions import once
    from checkout.idempotency import Scope
    from checkout.lab import controls

    with app.app_context():
        record = once.store.find(Scope("cus_demo_alice", "POST /api/orders", "running-key-000000001"))
    assert record is not None
    action, message = controls.kill_holder(record, under_gunicorn=False)
    assert action == "none" and "single process" in message


def test_the_unsafe_path_shows_every_side_effects_damage_too(app: Any, client: FlaskClient) -> None:
    """A retry on the unsafe twins: two orders, stock taken twice, two emails; a refund retried refunds twice."""
    from checkout.gateway import GatewayRefund
    from checkout.mail.outbox import OutboxMessage
    from tests.helpers import Ledger

    body, headers = order_body(), {**ALICE, **bought("unsafe-retried-1")}
    first = client.post("/api/lab/unsafe-orders", json=body, headers=headers).get_json()
    client.post("/api/lab/unsafe-orders", json=body, headers=headers)  # the retry of one purchase
    ledger = Ledger(app)
    assert len(ledger.orders()) == 2
    assert client.get("/api/products").get_json()[0]["stock"] == 100_000 - 4  # two mugs, taken twice
    assert [m.kind for m in ledger.rows(OutboxMessage)] == ["order_confirmation", "order_confirmation"]
    for _ in range(2):  # one refund of $5.00, sent twice
        refunded = client.post(
            f"/api/lab/unsafe-orders/{first['id']}/refunds", json={"amount_cents": 500}, headers=ALICE
        )
        assert refunded.status_code == 201
    assert [r.amount_cents for r in ledger.rows(GatewayRefund)] == [500, 500]
    damage = client.get("/api/lab/damage?purchase_prefix=unsafe-retried-").get_json()["totals"]
    assert damage["charged_more_than_once_cents"] == 3300


def test_the_lab_says_when_the_webhook_paid_the_latest_payment_whose_answer_was_lost(
    app: Any, client: FlaskClient
) -> None:
    from checkout.gateway import GatewayEvent
    from tests.helpers import ANSWER_LOST_CARD, Ledger, event_of, signed_post

    add_to_cart(client)
    client.post(
        "/checkout", data={**checkout_fields(client), "email": "s@example.com", "card_number": ANSWER_LOST_CARD}
    )
    assert len(Ledger(app).rows(GatewayEvent)) == 1
    signed_post(client, event_of(Ledger(app), "charge.succeeded"))
    focus = client.get("/lab/live").get_data(as_text=True)
    assert 'data-testid="focus-order-status">paid<' in focus
    assert "The order is already paid: the gateway’s webhook finished it" in focus


def test_the_lab_draws_a_keys_steps_as_a_sequence_with_the_duplicate_stopped_at_its_layer(
    app: Flask, client: FlaskClient, live_server: LiveServer
) -> None:
    from checkout.gateway.relay import deliverer

    key = "sequence-diagram-key-1"
    body = order_body(card="4000 0000 0000 0259")
    assert client.post("/api/orders", json=body, headers={**ALICE, "Idempotency-Key": key}).status_code == 503
    with app.app_context():
        deliverer(app).deliver_due(f"{live_server.url}/webhooks/gateway")  # the webhook pays it
    other = order_body(card="4000 0000 0000 0259", email="someone.else@example.com")
    assert client.post("/api/orders", json=other, headers={**ALICE, "Idempotency-Key": key}).status_code == 422
    page = client.get(f"/lab?key={key}").get_data(as_text=True)
    diagram = page[page.index('data-testid="sequence"') : page.index("</svg>")]
    drawn = re.findall(r'<g class="([^"]+)" data-event="([^"]+)"', diagram)
    assert [event for _css, event in drawn][:7] == [
        "received", "claimed", "order_created", "gateway_called", "answer_lost", "released", "charged"
    ]  # fmt: skip
    assert ("message lost", "answer_lost") in drawn and ("message stopped", "mismatch") in drawn
    assert "charged by=webhook" in diagram
    # The webhook's charge comes from its lifeline (4) to the shop's (1); the mismatch stops at the database (2).
    assert re.search(r'data-event="charged" data-from="4" data-to="1"', diagram)
    assert re.search(r'data-event="mismatch" data-from="0" data-to="2"', diagram)


def test_a_key_two_customers_used_shows_one_customers_timeline_named(client: FlaskClient, ledger: Ledger) -> None:
    """A key means something only in its scope: the lab's lookup shows the newest record's customer and endpoint,
    and that record's steps alone, not the other customer's beside them."""
    key = "shared-key-" + "0" * 16
    assert post_order(client, key, order_body(), headers=ALICE).status_code == 201
    assert post_order(client, key, order_body(), headers=BOB).status_code == 201
    html = client.get("/lab/live", query_string={"key": key}).get_data(as_text=True)
    bobs = ledger.events(IdempotencyEvent.key == key, IdempotencyEvent.customer == "cus_demo_bob")
    assert 0 < len(bobs) < len(ledger.events(IdempotencyEvent.key == key))
    assert html.count('data-testid="timeline-worker"') == len(bobs)
    assert 'data-testid="focus-customer" title="cus_demo_bob"' in html
    assert 'data-testid="focus-endpoint">POST /api/orders<' in html


def test_the_timeline_writes_its_gaps_in_the_pages_language(client: FlaskClient) -> None:
    key = "gap-key-" + "0" * 16
    assert post_order(client, key, order_body(), headers=ALICE).status_code == 201
    english = client.get("/lab/live", query_string={"key": key, "lang": "en"}).get_data(as_text=True)
    russian = client.get("/lab/live", query_string={"key": key, "lang": "ru"}).get_data(as_text=True)
    assert re.search(r'class="gap"[^>]*>\+\d+(\.\d+)? s<', english)
    assert re.search(r'class="gap"[^>]*>\+\d+(,\d+)? с<', russian) and not re.search(
        r'class="gap"[^>]*>[^<]* s<', russian
    )


def test_the_articles_payments_have_a_table_of_their_own_and_their_charges_name_them(client: FlaskClient) -> None:
    """POST /api/payments in the lab: its own rows, and a charge filed under the payment, not as an order."""
    paid = post_payment(client, "lab-payment-key-0001", payment_body(orderId="order-123"))
    assert paid.status_code == 201
    payment_id = paid.get_json()["id"]
    ledger = client.get("/api/lab/ledger").get_json()
    [payment] = ledger["payments"]
    assert (payment["id"], payment["order_id"], payment["status"]) == (payment_id, "order-123", "succeeded")
    [charge] = ledger["charges"]
    assert (charge["payment_id"], charge["order_id"], charge["id"]) == (payment_id, None, payment["charge_id"])
    assert ledger["orders"] == []
    page = client.get("/lab/live").get_data(as_text=True)
    table = page[page.index('data-testid="lab-payments"') :]
    assert f'data-copy="{payment_id}"' in table[: table.index("</table>")]
    focus = client.get("/lab/live", query_string={"key": "lab-payment-key-0001"}).get_data(as_text=True)
    assert "<dt>Payment</dt>" in focus and "<dt>Order</dt>" not in focus  # its reference is a payment
    assert 'data-testid="focus-order-status">succeeded</span>' in focus  # the payment's own status
