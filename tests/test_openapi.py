"""GET /api/openapi.json: a valid OpenAPI 3.1 document that names every route and answer of the JSON API."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import example, given, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate

from checkout.errors import PROBLEM_TYPES


@pytest.fixture
def document(client: FlaskClient) -> dict[str, Any]:
    response = client.get("/api/openapi.json")
    assert response.status_code == 200 and response.mimetype == "application/json"
    found: dict[str, Any] = response.get_json()
    return found


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    validate(document)  # raises on any violation of the OpenAPI 3.1 schema
    assert document["openapi"].startswith("3.1")


def test_every_json_route_of_the_app_is_described(app: Flask, document: dict[str, Any]) -> None:
    described = {(method.upper(), path) for path, operations in document["paths"].items() for method in operations}
    routes = {
        (method, rule.rule.replace("<", "{").replace(">", "}"))
        for rule in app.url_map.iter_rules()
        if (rule.rule.startswith("/api/") and not rule.rule.startswith("/api/lab/"))
        or rule.rule in ("/webhooks/gateway", "/metrics")
        for method in rule.methods or ()
        if method not in ("HEAD", "OPTIONS")
    }
    assert described == routes
    assert ("GET", "/api/openapi.json") in described  # the document names itself


def test_every_api_answer_includes_the_proxys_own_502_and_504_with_retry_after(document: dict[str, Any]) -> None:
    for path, operations in document["paths"].items():
        for operation in operations.values():
            for status in ("502", "504"):
                answer = operation["responses"].get(status)
                if not path.startswith("/api/"):
                    continue
                assert answer is not None, (path, status)
                assert "application/problem+json" in answer["content"] and "Retry-After" in answer["headers"]
    assert "`gateway-timeout`" in document["paths"]["/api/orders"]["post"]["responses"]["504"]["description"]


KEYISH = st.text(alphabet='ab9-,"\\!~ ', min_size=14, max_size=22)


@settings(max_examples=400, deadline=None)
@given(KEYISH | KEYISH.map(lambda inside: f'"{inside}"') | st.sampled_from(["x" * 255, "x" * 256]))
@example('"aaaaaaaaaaaaaaaa\\\\b"')  # an escaped backslash, then a letter: a valid quoted key
def test_the_keys_pattern_accepts_exactly_what_the_shop_accepts(raw: str) -> None:
    from checkout.idempotency import parse_key
    from checkout.idempotency.keys import InvalidKey
    from checkout.openapi import KEY_SCHEMA

    try:
        accepted = parse_key(raw) is not None and raw == raw.strip()  # a schema sees the header as sent
    except InvalidKey:
        accepted = False
    assert bool(re.fullmatch(KEY_SCHEMA["pattern"], raw)) == accepted, raw


def test_the_idempotent_posts_name_the_key_and_every_answer_the_contract_gives(document: dict[str, Any]) -> None:
    for path in ("/api/orders", "/api/orders/{order_id}/refunds"):
        post = document["paths"][path]["post"]
        names = {p.get("name") or p["$ref"].rsplit("/", 1)[1] for p in post["parameters"]}
        assert {"IdempotencyKey", "Prefer"} <= names
        assert {"201", "400", "401", "409", "413", "415", "422", "429", "503"} <= set(post["responses"])
        assert set(post["responses"]["201"]["headers"]) >= {"Location", "Idempotent-Replayed"}
        for status in ("409", "503"):
            assert "Retry-After" in post["responses"][status]["headers"]
    assert "402" in document["paths"]["/api/orders"]["post"]["responses"]
    header = document["components"]["parameters"]["IdempotencyKey"]
    assert header["in"] == "header" and header["name"] == "Idempotency-Key" and header["required"] is True


def test_every_problem_type_the_api_sends_is_named_in_the_document(document: dict[str, Any]) -> None:
    text = str(document)
    sent = {
        "idempotency-key-reused",
        "idempotency-request-in-progress",
        "invalid-idempotency-key",
        "malformed-json",
        "payment-unconfirmed",
        "card-declined",
        "payment-abandoned",
        "out-of-stock",
        "order-not-refundable",
        "refund-exceeds-charge",
        "bad-signature",
        *(PROBLEM_TYPES[status] for status in (401, 404, 413, 415, 422, 429)),
    }
    assert sorted(t for t in sent if f"`{t}`" not in text) == []


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_LAB": False}])
def test_the_document_is_served_even_with_the_lab_off(client: FlaskClient) -> None:
    assert client.get("/api/openapi.json").status_code == 200


def test_the_rules_of_the_body_are_in_the_schema_not_only_in_prose(
    document: dict[str, Any], client: FlaskClient
) -> None:
    order_id = document["components"]["schemas"]["PaymentRequest"]["properties"]["orderId"]
    assert (order_id["minLength"], order_id["maxLength"], order_id["pattern"]) == (1, 64, "^[!-~]{1,64}$")
    key = document["components"]["parameters"]["IdempotencyKey"]
    assert "comma" in key["description"]
