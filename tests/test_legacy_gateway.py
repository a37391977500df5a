"""A gateway without idempotency: its legacy interface charges on every call, so the shop looks the
charge up by reference before any retry (POST /api/lab/legacy-gateway/orders); its twin without the
lookup (POST /api/lab/legacy-gateway/no-lookup/orders) charges twice after a lost answer."""

from __future__ import annotations

import time
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from checkout.audit import IdempotencyEvent
from checkout.gateway import CardDeclined, GatewayCharge, GatewayEvent, GatewayTimeout, GatewayUnavailable
from checkout.gateway.legacy import LegacyGateway
from checkout.lab.legacy import LEGACY_PATH, NO_LOOKUP_PATH, legacy_gateway
from checkout.lab.tables import LabOrder
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    BOB,
    DECLINED_CARD,
    GOOD_CARD,
    SLOW_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    bought,
    order_body,
    table_counts,
)

LEGACY = "/api/lab/legacy-gateway/orders"
NO_LOOKUP = "/api/lab/legacy-gateway/no-lookup/orders"
TOTAL = 3300  # order_body(): two mugs and a sticker


def post(client: FlaskClient, path: str, key: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    return client.post(
        path, json=order_body() if body is None else body, headers={**ALICE, "Idempotency-Key": key, **(headers or {})}
    )


def damage_of(client: FlaskClient, path: str) -> dict[str, int]:
    by_path = client.get("/api/lab/damage").get_json()["by_path"]
    return dict(by_path.get(path, {}))


def measured(name: str, client: FlaskClient, path: str, ledger: Ledger) -> None:
    found = damage_of(client, path)
    print(
        f"\n[measure] {name}: path={path} orders={len(ledger.orders(LabOrder.path == path))} "
        f"succeeded_charges={len(ledger.succeeded_charges())} charged=${found.get('charged_cents', 0) / 100:.2f} "
        f"charged_more_than_once=${found.get('charged_more_than_once_cents', 0) / 100:.2f}"
    )


# --- the legacy interface itself (it knows nothing of the shop) ----------------------------------


@pytest.fixture
def legacy(app: Flask) -> LegacyGateway:
    with app.app_context():
        return legacy_gateway(app)


def test_the_legacy_interface_charges_on_every_call_even_for_one_reference(
    legacy: LegacyGateway, ledger: Ledger
) -> None:
    first = legacy.charge(amount_cents=500, currency="USD", card_number="4242424242424242", reference="order-1")
    second = legacy.charge(amount_cents=500, currency="USD", card_number="4242424242424242", reference="order-1")
    assert first.id != second.id and first.succeeded and second.succeeded
    assert [c.id for c in legacy.find_by_reference("order-1")] == [first.id, second.id]
    assert legacy.find_by_reference("order-2") == []
    rows = ledger.charges()
    assert {(r.reference, r.status, r.keyed) for r in rows} == {("order-1", "succeeded", False)} and len(rows) == 2
    assert first.gateway_key == "" and all(r.gateway_key.startswith("legacy-") for r in rows)  # internal, never shown
    assert ledger.rows(GatewayEvent) == []  # it sends no webhooks: only the merchant's lookup finds a lost charge


def test_the_keyed_interface_still_refuses_a_second_succeeded_charge_for_a_reference(app: Flask) -> None:
    gateway = app.extensions["checkout.gateway"]
    gateway.charge(gateway_key="k-1", amount_cents=500, currency="USD", card_number=GOOD_CARD, reference="order-9")
    from checkout.gateway import ReferenceAlreadyCharged

    with pytest.raises(ReferenceAlreadyCharged):
        gateway.charge(gateway_key="k-2", amount_cents=500, currency="USD", card_number=GOOD_CARD, reference="order-9")


def test_the_fault_cards_apply_to_the_legacy_interface_the_first_call_counted_per_reference(
    legacy: LegacyGateway, ledger: Ledger
) -> None:
    def charge(card: str, reference: str) -> Any:
        return legacy.charge(amount_cents=700, currency="USD", card_number=card.replace(" ", ""), reference=reference)

    with pytest.raises(GatewayUnavailable):
        charge(UNAVAILABLE_CARD, "down")
    assert legacy.find_by_reference("down") == []  # nothing was charged
    assert charge(UNAVAILABLE_CARD, "down").succeeded  # the second call for that reference goes through

    with pytest.raises(GatewayTimeout):
        charge(ANSWER_LOST_CARD, "lost")
    [charged] = legacy.find_by_reference("lost")  # the answer was lost, the charge exists
    assert charged.succeeded
    assert charge(ANSWER_LOST_CARD, "lost").id != charged.id  # asked again, it charges again: no key to remember

    with pytest.raises(CardDeclined) as declined:
        charge(DECLINED_CARD, "declined")
    assert declined.value.charge.status == "declined"

    started = time.monotonic()
    assert charge(SLOW_CARD, "slow").succeeded
    assert time.monotonic() - started >= legacy.slow_seconds * 0.9
    assert len(ledger.succeeded_charges()) == 4


# --- the shop, paying through it ---------------------------------------------------------------


def test_a_lost_answer_is_503_and_the_retry_looks_the_charge_up_instead_of_charging_again(
    client: FlaskClient, ledger: Ledger
) -> None:
    key = "legacy-lost-answer-0001"
    lost = post(client, LEGACY, key, order_body(ANSWER_LOST_CARD), bought("legacy-lost"))
    assert lost.status_code == 503 and lost.headers["Retry-After"]
    assert lost.mimetype == "application/problem+json" and lost.get_json()["idempotency_key"] == key
    retried = post(client, LEGACY, key, order_body(ANSWER_LOST_CARD), bought("legacy-lost"))
    assert retried.status_code == 201, retried.get_json()
    [order] = ledger.orders()
    [charge] = ledger.succeeded_charges()
    assert (order.path, order.status, order.charge_id, order.purchase_ref) == (
        LEGACY_PATH,
        "paid",
        charge.id,
        "legacy-lost",
    )
    assert (
        retried.get_json()["charge_id"] == charge.id and retried.headers["Location"] == f"/api/orders/{order.public_id}"
    )
    events = ledger.events()
    assert events.index("answer_lost") < events.index("resumed") < events.index("looked_up") < events.index("charged")
    assert damage_of(client, LEGACY_PATH)["charged_more_than_once_cents"] == 0
    measured("legacy gateway, lost answer + retry, with the lookup", client, LEGACY_PATH, ledger)
    replay = post(client, LEGACY, key, order_body(ANSWER_LOST_CARD), bought("legacy-lost"))
    assert replay.headers["Idempotent-Replayed"] == "true" and replay.get_data() == retried.get_data()


def test_without_the_lookup_the_retry_after_a_lost_answer_charges_twice(
    client: FlaskClient, ledger: Ledger, runner: Any
) -> None:
    key = "legacy-no-lookup-00001"
    assert post(client, NO_LOOKUP, key, order_body(ANSWER_LOST_CARD), bought("no-lookup")).status_code == 503
    retried = post(client, NO_LOOKUP, key, order_body(ANSWER_LOST_CARD), bought("no-lookup"))
    assert retried.status_code == 201
    [order] = ledger.orders()
    charges = ledger.succeeded_charges()
    assert order.path == NO_LOOKUP_PATH and len(charges) == 2  # one order, two charges: the bug the lookup prevents
    assert {c.reference for c in charges} == {order.public_id}
    assert damage_of(client, NO_LOOKUP_PATH)["charged_more_than_once_cents"] == TOTAL
    measured("legacy gateway twin, lost answer + retry, no lookup", client, NO_LOOKUP_PATH, ledger)
    report = runner.invoke(args=["gateway", "reconcile-report"])
    assert report.exit_code == 1
    assert "charge without a paid order" in report.output and "one more charge" in report.output


def test_the_gateway_down_then_the_retry_finds_nothing_and_charges_once(client: FlaskClient, ledger: Ledger) -> None:
    key = "legacy-gateway-down-01"
    assert post(client, LEGACY, key, order_body(UNAVAILABLE_CARD)).status_code == 503
    assert ledger.succeeded_charges() == []
    assert post(client, LEGACY, key, order_body(UNAVAILABLE_CARD)).status_code == 201
    assert len(ledger.succeeded_charges()) == 1
    [looked_up] = [e for e in ledger.rows(IdempotencyEvent) if e.name == "looked_up"]
    assert looked_up.detail.get("found") is None


def test_a_decline_is_402_final_and_replayed(client: FlaskClient, ledger: Ledger) -> None:
    key = "legacy-declined-00001"
    first = post(client, LEGACY, key, order_body(DECLINED_CARD))
    assert first.status_code == 402 and first.get_json()["type"] == "card-declined"
    again = post(client, LEGACY, key, order_body(DECLINED_CARD))
    assert again.status_code == 402 and again.headers["Idempotent-Replayed"] == "true"
    assert [(o.status, o.path) for o in ledger.orders()] == [("declined", LEGACY_PATH)]
    assert [c.status for c in ledger.charges()] == ["declined"]


def test_the_same_key_with_another_body_is_422_and_another_customer_is_another_order(
    client: FlaskClient, ledger: Ledger
) -> None:
    key = "legacy-reused-key-0001"
    assert post(client, LEGACY, key).status_code == 201
    reused = post(client, LEGACY, key, order_body(email="mallory@example.com"))
    assert reused.status_code == 422 and reused.get_json()["type"] == "idempotency-key-reused"
    assert post(client, LEGACY, key, headers=BOB).status_code == 201
    assert len(ledger.orders()) == 2 and len(ledger.succeeded_charges()) == 2


@pytest.mark.parametrize("path", [LEGACY, NO_LOOKUP])
def test_bad_requests_are_problems_like_the_api_and_write_nothing(app: Flask, client: FlaskClient, path: str) -> None:
    before = table_counts(app)
    key = {"Idempotency-Key": "legacy-bad-input-0001"}
    answers = [
        client.post(path, json=order_body(), headers=key),  # no token
        client.post(path, json=order_body(), headers={**ALICE}),  # no key
        client.post(path, json=order_body(), headers={**ALICE, "Idempotency-Key": "short"}),
        client.post(path, data="{", content_type="application/json", headers={**ALICE, **key}),
        client.post(path, data="items", content_type="text/plain", headers={**ALICE, **key}),
        client.post(path, json=order_body(card_number="1234"), headers={**ALICE, **key}),
        client.post(path, json=order_body(items=[{"sku": "NOPE-01", "quantity": 1}]), headers={**ALICE, **key}),
    ]
    assert [a.status_code for a in answers] == [401, 400, 400, 400, 415, 422, 422]
    assert {a.mimetype for a in answers} == {"application/problem+json"}
    assert table_counts(app) == before
    assert client.post(path, json=order_body(), headers={**ALICE, **key}).status_code == 201  # the key stays usable


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_LAB": False}])
def test_with_the_lab_off_the_legacy_routes_and_the_report_page_are_404(
    client: FlaskClient, app_overrides: dict[str, Any], ledger: Ledger
) -> None:
    assert post(client, LEGACY, "legacy-lab-off-000001").status_code == 404
    assert post(client, NO_LOOKUP, "legacy-lab-off-000001").status_code == 404
    assert client.get("/lab/reconciliation").status_code == 404
    assert ledger.orders() == [] and ledger.rows(GatewayCharge) == []


def test_a_pending_legacy_payment_reached_under_its_key_from_post_api_orders_is_409_and_not_charged_again(
    client: FlaskClient, ledger: Ledger
) -> None:
    """The orders' unique (customer, key) across endpoints: the shop's API finds the legacy twin's pending
    order (charged, its answer lost) and answers 409, as for any order in progress; it never pays it on
    through another gateway interface (a review found it paying it twice)."""
    key = "legacy-then-shop-0001"
    assert post(client, LEGACY, key, order_body(ANSWER_LOST_CARD)).status_code == 503  # charged; answer lost
    shop = client.post("/api/orders", json=order_body(ANSWER_LOST_CARD), headers={**ALICE, "Idempotency-Key": key})
    assert shop.status_code == 409 and shop.get_json()["type"].endswith("idempotency-request-in-progress")
    assert shop.get_json()["idempotency_key"] == key  # as every 409 of the API names it
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
