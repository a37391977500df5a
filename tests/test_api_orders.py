"""POST /api/orders and the Idempotency-Key, one row of the spec's table per test."""

from __future__ import annotations

import json
import uuid

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.helpers import (
    ALICE,
    BOB,
    DECLINED_CARD,
    Ledger,
    claim_as_a_dying_worker,
    order_body,
    post_order,
    stored_for_the_key,
)


def new_key() -> str:
    return str(uuid.uuid4())


def post_as_it_is(client: FlaskClient, body: str, content_type: str) -> TestResponse:
    """POST /api/orders as alice under a new key, the body sent as it is (not JSON-encoded here) with this type."""
    return client.post(
        "/api/orders", data=body, content_type=content_type, headers={**ALICE, "Idempotency-Key": new_key()}
    )


def test_first_success_is_201_with_location_and_the_order(client: FlaskClient, ledger: Ledger) -> None:
    response = post_order(client, new_key())
    assert response.status_code == 201
    order = response.get_json()
    assert response.headers["Location"] == f"/api/orders/{order['id']}"
    assert order["id"].startswith("ord_")
    assert order["status"] == "paid"
    assert order["total_cents"] == 2 * 1400 + 500
    assert order["card_last4"] == "4242"
    assert order["charge_id"].startswith("ch_")
    assert order["items"] == [
        {"sku": "MUG-01", "quantity": 2, "unit_price_cents": 1400},
        {"sku": "STK-01", "quantity": 1, "unit_price_cents": 500},
    ]
    assert "Idempotent-Replayed" not in response.headers
    [record] = ledger.records()
    assert (record.state, record.response_status) == ("completed", 201)
    assert [c.reference for c in ledger.succeeded_charges()] == [order["id"]]


def test_replay_returns_the_stored_status_and_byte_identical_body(client: FlaskClient, ledger: Ledger) -> None:
    key = new_key()
    first = post_order(client, key)
    again = post_order(client, key)
    assert again.status_code == 201
    assert again.get_data() == first.get_data()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["Location"] == first.headers["Location"]
    assert len(ledger.orders()) == 1
    assert len(ledger.charges()) == 1


def test_same_key_still_in_progress_is_409_with_retry_after(client: FlaskClient, app, ledger: Ledger) -> None:
    key = new_key()
    claim_as_a_dying_worker(app, key, lease_seconds=60)  # another worker holds the key, mid-operation
    response = post_order(client, key)
    assert response.status_code == 409
    assert int(response.headers["Retry-After"]) >= 1
    assert response.mimetype == "application/problem+json"
    [order] = ledger.orders()  # the other worker's first phase created it; nothing was charged
    assert response.get_json()["idempotency_key"] == key and response.get_json()["order_id"] == order.public_id
    assert order.status == "pending" and ledger.charges() == []
    [record] = ledger.records()
    assert record.state == "in_progress" and record.response_status is None


def test_same_key_different_payload_is_422_and_leaves_the_record_untouched(client: FlaskClient, ledger: Ledger) -> None:
    key = new_key()
    first = post_order(client, key)
    [before] = ledger.records()
    other = post_order(client, key, order_body(email="mallory@example.com"))
    assert other.status_code == 422
    assert other.get_json()["type"] == "idempotency-key-reused"
    [after] = ledger.records()
    assert stored_for_the_key(after) == stored_for_the_key(before)
    assert post_order(client, key).get_data() == first.get_data()
    assert len(ledger.orders()) == 1


def test_missing_key_is_400_and_nothing_is_stored(client: FlaskClient, ledger: Ledger) -> None:
    response = post_order(client, None)
    assert response.status_code == 400
    assert response.mimetype == "application/problem+json"
    assert ledger.records() == [] and ledger.orders() == []


def test_malformed_keys_are_400(client: FlaskClient, ledger: Ledger) -> None:
    for bad in ("short", "x" * 256, "has a space in it!!", "ключ-не-ascii-0000000"):
        assert post_order(client, bad).status_code == 400, bad
    assert ledger.records() == []


def test_a_quoted_key_is_unquoted(client: FlaskClient, ledger: Ledger) -> None:
    key = new_key()
    first = post_order(client, f'"{key}"')
    assert first.status_code == 201
    again = post_order(client, key)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert [r.key for r in ledger.records()] == [key]


def test_no_or_unknown_token_is_401(client: FlaskClient, ledger: Ledger) -> None:
    anonymous = client.post("/api/orders", json=order_body(), headers={"Idempotency-Key": new_key()})
    wrong = client.post(
        "/api/orders", json=order_body(), headers={"Idempotency-Key": new_key(), "Authorization": "Bearer nope"}
    )
    for response in (anonymous, wrong):
        assert response.status_code == 401
        assert response.mimetype == "application/problem+json"
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert ledger.records() == []


def test_malformed_json_is_400(client: FlaskClient, ledger: Ledger) -> None:
    response = post_as_it_is(client, "{not json", "application/json")
    assert response.status_code == 400
    assert response.get_json()["status"] == 400
    assert ledger.records() == []


@pytest.mark.parametrize(
    "constant", ["NaN", "Infinity", "-Infinity", '{"items": [{"sku": "MUG-01", "quantity": NaN}]}']
)
def test_nan_and_infinity_are_malformed_json_400(client: FlaskClient, ledger: Ledger, constant: str) -> None:
    response = post_as_it_is(client, constant, "application/json")
    assert response.status_code == 400
    assert response.get_json()["type"].endswith("malformed-json")
    assert ledger.records() == []


def test_a_quantity_sent_as_a_string_is_422_as_the_document_says_integer(client: FlaskClient, ledger: Ledger) -> None:
    response = post_order(client, new_key(), order_body(items=[{"sku": "MUG-01", "quantity": "1"}]))
    assert response.status_code == 422
    assert response.get_json()["errors"] == {"items[0].quantity": ["must be a whole number from 1 to 99"]}
    assert ledger.orders() == []


def test_a_body_that_is_not_json_is_415(client: FlaskClient, ledger: Ledger) -> None:
    response = post_as_it_is(client, "items=1", "application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert response.mimetype == "application/problem+json"
    assert ledger.records() == []


def test_a_body_over_64_kib_is_413(client: FlaskClient, ledger: Ledger) -> None:
    body = json.dumps(order_body(padding="x" * (64 * 1024)))
    response = post_as_it_is(client, body, "application/json")
    assert response.status_code == 413
    assert response.mimetype == "application/problem+json"
    assert ledger.records() == []


def test_an_invalid_body_is_422_with_field_errors_and_the_key_stays_usable(client: FlaskClient, ledger: Ledger) -> None:
    key = new_key()
    invalid = order_body(
        items=[{"sku": "NOPE", "quantity": 1}, {"sku": "MUG-01", "quantity": 100}],
        email="not-an-email",
        card_number="4242 4242 4242 4241",
    )
    response = post_order(client, key, invalid)
    assert response.status_code == 422
    errors = response.get_json()["errors"]
    assert set(errors) == {"items[0].sku", "items[1].quantity", "email", "card_number"}
    assert ledger.records() == [] and ledger.orders() == []
    fixed = post_order(client, key)
    assert fixed.status_code == 201


def test_an_unknown_sku_is_named_even_when_its_quantity_is_wrong_too(client: FlaskClient) -> None:
    response = post_order(client, new_key(), order_body(items=[{"sku": "NOPE", "quantity": 0}]))
    assert response.status_code == 422
    assert response.get_json()["errors"] == {
        "items[0].quantity": ["must be a whole number from 1 to 99"],
        "items[0].sku": ["unknown sku 'NOPE'"],
    }


def test_a_declined_card_is_402_stored_and_replayed(client: FlaskClient, ledger: Ledger) -> None:
    key = new_key()
    first = post_order(client, key, order_body(card=DECLINED_CARD))
    assert first.status_code == 402
    assert first.get_json()["type"] == "card-declined"
    again = post_order(client, key, order_body(card=DECLINED_CARD))
    assert again.status_code == 402
    assert again.get_data() == first.get_data()
    assert again.headers["Idempotent-Replayed"] == "true"
    [order] = ledger.orders()
    assert order.status == "declined"
    assert ledger.succeeded_charges() == []
    assert [c.status for c in ledger.charges()] == ["declined"]


def test_the_same_key_from_two_customers_is_two_unrelated_orders(client: FlaskClient, ledger: Ledger) -> None:
    key = new_key()
    alice = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": key})
    bob = client.post("/api/orders", json=order_body(email="bob@example.com"), headers={**BOB, "Idempotency-Key": key})
    assert alice.status_code == bob.status_code == 201
    assert "Idempotent-Replayed" not in bob.headers
    assert alice.get_json()["id"] != bob.get_json()["id"]
    assert bob.get_json()["email"] == "bob@example.com"
    assert len(ledger.orders()) == 2 and len(ledger.succeeded_charges()) == 2


def test_an_order_is_visible_only_to_its_customer(client: FlaskClient) -> None:
    order = post_order(client, new_key()).get_json()
    assert client.get(f"/api/orders/{order['id']}", headers=ALICE).get_json() == order
    assert client.get(f"/api/orders/{order['id']}", headers=BOB).status_code == 404
    assert client.get("/api/orders", headers=BOB).get_json() == []


def test_orders_are_listed_newest_first(client: FlaskClient) -> None:
    ids = [post_order(client, new_key()).get_json()["id"] for _ in range(3)]
    listed = client.get("/api/orders", headers=ALICE).get_json()
    assert [o["id"] for o in listed] == list(reversed(ids))


def test_products_are_listed_with_prices_in_cents(client: FlaskClient) -> None:
    products = client.get("/api/products").get_json()
    assert len(products) == 11
    assert products[0] == {
        "sku": "MUG-01",
        "name": "Idempotent Mug",
        "price_cents": 1400,
        "currency": "USD",
        "stock": 100_000,
    }
    assert products[-1]["sku"] == "LAST-01" and products[-1]["stock"] == 1  # the last one: two tabs race for it


def test_unknown_api_routes_answer_problem_json(client: FlaskClient) -> None:
    response = client.get("/api/nothing-here")
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"
    assert client.delete("/api/orders", headers=ALICE).status_code == 405
