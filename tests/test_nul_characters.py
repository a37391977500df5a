"""A NUL character anywhere a client can put one (a path, a query, a form) is a clean 4xx, never a 5xx.

PostgreSQL cannot store a NUL in a text value and psycopg refuses to send one, so a NUL that reaches a
query is a 500 there (SQLite stores it quietly): run these with TEST_DATABASE_URL to see what they guard.
Every route of the URL map is walked, so a route added later is covered without a new test."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.helpers import ALICE, form_fields, table_counts

QUERIES = ("idempotency_key=%00", "lang=%00", "key=%00", "key=a%00b", "%00=1")
_VARIABLE = re.compile(r"<(?:[^:>]+:)?[^>]+>")


def with_nul_in_every_variable(rule: str) -> str:
    return _VARIABLE.sub("x%00", rule)


def rules(app: Flask, method: str) -> list[str]:
    return sorted({r.rule for r in app.url_map.iter_rules() if method in (r.methods or ())})


@pytest.fixture
def answering(app: Flask) -> Flask:
    """Errors become answers (500s included), as a client sees them, so one run lists every failing route."""
    app.config["PROPAGATE_EXCEPTIONS"] = False
    return app


def csrf_token(client: FlaskClient) -> str:
    return form_fields(client.get("/").get_data(as_text=True), form_id=None)["csrf_token"]


def failures(responses: list[tuple[str, Any]], expected: set[int]) -> list[str]:
    """What answered otherwise than ``expected``, or not as problem+json on the API; 5xx first."""
    wrong = []
    for where, response in responses:
        api = where.split("?")[0].startswith("/api/")
        if response.status_code not in expected or (api and response.mimetype != "application/problem+json"):
            wrong.append(f"{response.status_code} {response.mimetype} {where}")
    return sorted(wrong, reverse=True)


def test_a_nul_in_a_path_variable_or_a_query_parameter_of_any_get_route_is_a_clean_4xx(
    answering: Flask, client: FlaskClient
) -> None:
    before = table_counts(answering)
    responses = []
    for rule in rules(answering, "GET"):
        path = with_nul_in_every_variable(rule)
        plain = _VARIABLE.sub("x", rule)
        if path != rule:
            responses.append((path, client.get(path, headers=ALICE)))
        for query in QUERIES:
            responses.append((f"{plain}?{query}", client.get(f"{plain}?{query}", headers=ALICE)))
    assert failures(responses, {400, 404}) == []
    assert table_counts(answering) == before


def test_a_nul_in_a_path_variable_of_any_post_route_is_404_and_writes_nothing(
    answering: Flask, client: FlaskClient
) -> None:
    token = csrf_token(client)
    before = table_counts(answering)
    responses = []
    for rule in rules(answering, "POST"):
        path = with_nul_in_every_variable(rule)
        if path != rule:
            form = client.post(path, data={"csrf_token": token}, headers=ALICE)
            json_body = client.post(path, json={"amount_cents": 100}, headers={**ALICE, "Idempotency-Key": "k" * 16})
            responses += [(f"{path} (form)", form), (f"{path} (json)", json_body)]
    assert failures(responses, {404}) == []
    assert table_counts(answering) == before


def test_a_nul_in_any_form_field_of_any_post_route_is_400_and_writes_nothing(
    answering: Flask, client: FlaskClient
) -> None:
    token = csrf_token(client)
    before = table_counts(answering)
    fields = ("key", "idempotency_key", "email", "sku", "name", "on", "card_number", "quantity")
    responses = []
    for rule in rules(answering, "POST"):
        path = _VARIABLE.sub("x", rule)
        for field in fields:
            response = client.post(path, data={"csrf_token": token, field: "a\x00b"}, headers=ALICE)
            responses.append((f"{path} ({field})", response))
    assert failures(responses, {400}) == []
    assert table_counts(answering) == before
