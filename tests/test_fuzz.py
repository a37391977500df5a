"""Property-based fuzzing of the API and the forms (invariant 5): whatever arrives, the answer
is not a 5xx, and a rejected request leaves every table as it was."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import ALICE, GOOD_CARD, add_to_cart, checkout_fields, checkout_with_a_mug, table_counts

# Any code point, lone surrogates and NUL included (hypothesis leaves surrogates out unless told).
any_text = st.text(st.characters(exclude_categories=()), max_size=40)
numbers = st.one_of(
    st.integers(), st.integers(-(10**40), 10**40), st.floats(allow_nan=True, allow_infinity=True), st.booleans()
)
json_values = st.recursive(
    st.none() | numbers | any_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4),
    max_leaves=10,
)
skus = st.one_of(st.sampled_from(["MUG-01", "STK-01", "LAST-01", "NOPE"]), any_text, json_values)
items = st.lists(st.fixed_dictionaries({"sku": skus, "quantity": st.one_of(st.integers(-3, 120), numbers)}), max_size=4)
cards = st.one_of(st.sampled_from([GOOD_CARD, "4242424242424242", "4000 0000 0000 0002", "４２４２"]), any_text)
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"items": st.one_of(items, json_values), "email": st.one_of(any_text, json_values), "card_number": cards}
    ),
)
keys = st.one_of(
    st.none(), st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=300), st.uuids().map(str)
)


def post_form(client: FlaskClient, path: str, data: dict[str, str]) -> Any:
    """A form POST whose values may hold anything, lone surrogates included (sent as the bytes they encode to)."""
    body = urlencode(data, encoding="utf-8", errors="surrogatepass")
    return client.post(path, data=body, content_type="application/x-www-form-urlencoded")


FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
pytestmark = pytest.mark.slow  # 120 examples a test: seconds each


def rejected(response: Any) -> bool:
    """An answer that says "not done": nothing may have been written for it."""
    if response.status_code in (400, 401, 404, 405, 413, 415):
        return True
    return response.status_code == 422 and (response.get_json(silent=True) or {}).get("type") == "validation-error"


@FUZZ
@given(body=bodies, key=keys, raw=st.booleans())
def test_no_api_body_or_key_gets_a_5xx_and_a_rejection_writes_nothing(
    app: Flask, client: FlaskClient, body: Any, key: str | None, raw: bool
) -> None:
    headers = dict(ALICE)
    if key is not None:
        headers["Idempotency-Key"] = key
    data = json.dumps(body, ensure_ascii=raw) if not isinstance(body, str) or not raw else body
    encoded = data.encode("utf-8", "surrogatepass")
    before = table_counts(app)
    response = client.post("/api/orders", data=encoded, content_type="application/json", headers=headers)
    assert response.status_code < 500, response.get_data(as_text=True)[:300]
    if response.status_code >= 400:
        assert response.mimetype == "application/problem+json"
    if rejected(response):
        assert table_counts(app) == before


@FUZZ
@given(
    email=any_text,
    card=cards,
    key=st.one_of(any_text, st.uuids().map(str)),
    version=st.one_of(any_text, st.integers(-(10**30), 10**30).map(str)),
)
def test_no_checkout_form_gets_a_5xx_and_a_rejection_writes_nothing(
    app: Flask, email: str, card: str, key: str, version: str
) -> None:
    client = app.test_client()
    fields = checkout_with_a_mug(client)
    before = table_counts(app)
    response = post_form(
        client,
        "/checkout",
        {**fields, "email": email, "card_number": card, "idempotency_key": key, "cart_version": version},
    )
    assert response.status_code < 500, response.get_data(as_text=True)[:300]
    if response.status_code in (400, 422):
        assert table_counts(app) == before


@FUZZ
@given(sku=any_text, quantity=st.one_of(any_text, st.integers().map(str)))
def test_no_cart_form_gets_a_5xx(app: Flask, sku: str, quantity: str) -> None:
    client = app.test_client()
    add_to_cart(client)
    token = checkout_fields(client)["csrf_token"]
    before = table_counts(app)
    added = post_form(client, "/cart/items", {"csrf_token": token, "sku": sku, "quantity": quantity})
    assert added.status_code < 500
    if added.status_code >= 400:
        assert table_counts(app) == before
    path = quote(f"{uuid.uuid4().hex}{sku[:5]}".encode("utf-8", "surrogatepass"), safe="")
    removed = post_form(client, f"/cart/items/{path}/delete", {"csrf_token": token})
    assert removed.status_code < 500
