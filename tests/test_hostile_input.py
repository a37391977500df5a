"""Invariant 5: no input gets a 5xx, on the API and on every form; a rejected request writes nothing.

Each test is an input an attacker or a clumsy client really sent."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.conftest import LiveServer
from tests.helpers import (
    ALICE,
    GOOD_CARD,
    Ledger,
    checkout_with_a_mug,
    order_body,
    table_counts,
)
from tests.http import raw_request

# 4242 4242 4242 4242 written with digits that are not ASCII: str.isdigit() says yes to every one of them.
NOT_ASCII_CARDS = {
    "fullwidth": "４２４２ ４２４２ ４２４２ ４２４２",
    "superscript": "⁴²⁴² ⁴²⁴² ⁴²⁴² ⁴²⁴²",
    "circled": "④②④② ④②④② ④②④② ④②④②",
    "arabic-indic": "٤٢٤٢ ٤٢٤٢ ٤٢٤٢ ٤٢٤٢",
    "fullwidth decline card": "４０００ ００００ ００００ ０００２",
}


def post_raw(client: FlaskClient, data: str | bytes, key: str | None = None) -> Any:
    return client.post(
        "/api/orders",
        data=data,
        content_type="application/json",
        headers={**ALICE, "Idempotency-Key": key or str(uuid.uuid4())},
    )


def assert_rejected_and_nothing_written(app: Flask, before: dict[str, int], response: Any, status: int = 422) -> None:
    assert response.status_code == status, response.get_data(as_text=True)[:500]
    assert table_counts(app) == before


@pytest.mark.parametrize("name", list(NOT_ASCII_CARDS))
def test_card_numbers_with_digits_that_are_not_ascii_are_422_on_the_api(
    app: Flask, client: FlaskClient, name: str
) -> None:
    before = table_counts(app)
    response = post_raw(client, json.dumps(order_body(card=NOT_ASCII_CARDS[name])))
    assert_rejected_and_nothing_written(app, before, response)
    assert "card_number" in response.get_json()["errors"]


@pytest.mark.parametrize("name", list(NOT_ASCII_CARDS))
def test_card_numbers_with_digits_that_are_not_ascii_are_refused_by_the_checkout_form(
    app: Flask, client: FlaskClient, ledger: Ledger, name: str
) -> None:
    fields = checkout_with_a_mug(client)
    before = table_counts(app)
    response = client.post("/checkout", data={**fields, "email": "s@example.com", "card_number": NOT_ASCII_CARDS[name]})
    assert_rejected_and_nothing_written(app, before, response)
    assert ledger.charges() == []


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_json_nested_deeply_is_a_clean_4xx(app: Flask, client: FlaskClient, depth: int) -> None:
    before = table_counts(app)
    response = post_raw(client, "[" * depth + "]" * depth)
    assert 400 <= response.status_code < 500
    assert response.mimetype == "application/problem+json"
    assert table_counts(app) == before


@pytest.mark.parametrize("field", ["email", "card_number", "sku"])
@pytest.mark.parametrize("poison", [chr(0xD800), chr(0xDFFF), chr(0)], ids=["high-surrogate", "low-surrogate", "nul"])
def test_lone_surrogates_and_nul_characters_are_422_in_every_field(
    app: Flask, client: FlaskClient, field: str, poison: str
) -> None:
    body = order_body()
    if field == "sku":
        body["items"][0]["sku"] = f"MUG{poison}01"
    else:
        body[field] = f"{body[field][:4]}{poison}{body[field][4:]}"
    before = table_counts(app)
    response = post_raw(client, json.dumps(body))  # json.dumps escapes them: \ud800, \u0000
    assert_rejected_and_nothing_written(app, before, response)


def test_the_same_sku_twice_in_one_order_is_422_and_cannot_pass_the_99_limit(app: Flask, client: FlaskClient) -> None:
    before = table_counts(app)
    body = order_body(items=[{"sku": "MUG-01", "quantity": 60}, {"sku": "MUG-01", "quantity": 60}])
    response = post_raw(client, json.dumps(body))
    assert_rejected_and_nothing_written(app, before, response)
    assert "items[1].sku" in response.get_json()["errors"]


@pytest.mark.parametrize("number", ["9" * 5000, str(10**30), "-" + "9" * 40])
def test_enormous_integers_are_a_clean_4xx_in_json_and_in_forms(app: Flask, client: FlaskClient, number: str) -> None:
    before = table_counts(app)
    api = post_raw(
        client,
        f'{{"items":[{{"sku":"MUG-01","quantity":{number}}}],"email":"a@example.com","card_number":"{GOOD_CARD}"}}',
    )
    assert 400 <= api.status_code < 500 and api.mimetype == "application/problem+json"
    assert table_counts(app) == before

    fields = checkout_with_a_mug(client)
    before = table_counts(app)
    cart = client.post("/cart/items", data={"csrf_token": fields["csrf_token"], "sku": "MUG-01", "quantity": number})
    pay = client.post(
        "/checkout", data={**fields, "cart_version": number, "email": "a@example.com", "card_number": GOOD_CARD}
    )
    assert 400 <= cart.status_code < 500 and 400 <= pay.status_code < 500
    assert table_counts(app) == before


def test_nul_characters_in_forms_are_a_clean_4xx(app: Flask, client: FlaskClient) -> None:
    fields = checkout_with_a_mug(client)
    before = table_counts(app)
    for data in (
        {**fields, "email": "a\x00@example.com", "card_number": GOOD_CARD},
        {**fields, "email": "a@example.com", "card_number": GOOD_CARD, "idempotency_key": "k\x00" * 10},
    ):
        assert 400 <= client.post("/checkout", data=data).status_code < 500
    assert (
        400
        <= client.post("/cart/items", data={"csrf_token": fields["csrf_token"], "sku": "MUG\x0001"}).status_code
        < 500
    )
    assert (
        400 <= client.post("/cart/items/MUG%0001/delete", data={"csrf_token": fields["csrf_token"]}).status_code < 500
    )
    assert table_counts(app) == before


def test_a_method_that_is_not_allowed_is_405_with_allow(client: FlaskClient) -> None:
    for path, allowed in (("/api/orders", {"GET", "POST"}), ("/checkout", {"GET", "POST"}), ("/", {"GET"})):
        response = client.delete(path, headers=ALICE)
        assert response.status_code == 405, path
        assert allowed <= {m.strip() for m in response.headers["Allow"].split(",")}, path


@pytest.mark.slow
def test_more_than_one_idempotency_key_header_is_400_and_nothing_is_stored(
    app: Flask, live_server: LiveServer, ledger: Ledger
) -> None:
    """Two header lines are merged into one value by the server ("a,b" or "a, b"): that is not a new key."""
    body = json.dumps(order_body()).encode()
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    request = (
        b"POST /api/orders HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer demo-alice-token\r\n"
        b"Content-Type: application/json\r\nIdempotency-Key: %s\r\nIdempotency-Key: %s\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (first.encode(), second.encode(), len(body), body)
    )
    status, _headers, answer = raw_request(live_server.url, request)
    assert status == 400
    assert json.loads(answer)["type"] == "invalid-idempotency-key"
    assert ledger.records() == [] and ledger.orders() == []


def test_a_field_given_twice_in_one_object_is_400_and_nothing_is_stored(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    before = table_counts(app)
    body = '{"items": [{"sku": "MUG-01", "quantity": 1, "quantity": 9}], "email": "a@example.com", '
    for raw in (
        body + '"card_number": "4242424242424242"}',
        body + '"card_number": "1", "card_number": "4242424242424242"}',
    ):
        response = post_raw(client, raw)
        assert response.status_code == 400
        assert response.get_json()["type"] == "malformed-json" and "twice" in response.get_json()["detail"]
    assert table_counts(app) == before and ledger.records() == []


def test_a_comma_joined_idempotency_key_is_400(client: FlaskClient, ledger: Ledger) -> None:
    for merged in (f"{uuid.uuid4()},{uuid.uuid4()}", f"{uuid.uuid4()}, {uuid.uuid4()}"):
        response = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": merged})
        assert response.status_code == 400
    assert ledger.records() == []


@pytest.mark.slow
def test_a_malformed_chunked_body_is_400(app: Flask, live_server: LiveServer) -> None:
    before = table_counts(app)
    request = (
        b"POST /api/orders HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer demo-alice-token\r\n"
        b"Content-Type: application/json\r\nIdempotency-Key: " + str(uuid.uuid4()).encode() + b"\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    )
    status, _headers, _body = raw_request(live_server.url, request)
    assert status == 400
    assert table_counts(app) == before


@pytest.mark.slow
def test_a_chunked_body_past_the_size_limit_is_413_not_cut_off_and_processed(
    app: Flask, live_server: LiveServer
) -> None:
    payload = json.dumps(order_body(padding="x" * (80 * 1024))).encode()
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(payload[i : i + 4096]), payload[i : i + 4096]) for i in range(0, len(payload), 4096)
    )
    before = table_counts(app)
    request = (
        b"POST /api/orders HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer demo-alice-token\r\n"
        b"Content-Type: application/json\r\nIdempotency-Key: " + str(uuid.uuid4()).encode() + b"\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunks + b"0\r\n\r\n"
    )
    status, _headers, _body = raw_request(live_server.url, request)
    assert status == 413
    assert table_counts(app) == before
