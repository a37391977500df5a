"""A bearer token buys a budget of its own only when it is a customer's: a made-up token counts
against the address it comes from, like no token at all."""

from __future__ import annotations

import secrets
import uuid
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import event

from checkout.extensions import db
from tests.helpers import ALICE, BOB, order_body, post_order

LIMITED = [{"CHECKOUT_RATE_LIMIT": "3 per minute"}]


def random_token() -> dict[str, str]:
    return {"Authorization": f"Bearer {secrets.token_urlsafe(24)}"}


@pytest.mark.parametrize("app_overrides", LIMITED)
def test_made_up_tokens_get_no_budget_of_their_own_once_the_address_is_limited(
    client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    assert [client.get("/api/products").status_code for _ in range(3)] == [200] * 3
    assert client.get("/api/products").status_code == 429
    assert [client.get("/api/products", headers=random_token()).status_code for _ in range(10)] == [429] * 10


@pytest.mark.parametrize("app_overrides", LIMITED)
def test_made_up_tokens_spend_the_budget_of_their_address(client: FlaskClient, app_overrides: dict[str, Any]) -> None:
    statuses = [client.get("/api/products", headers=random_token()).status_code for _ in range(3)]
    assert statuses == [200] * 3
    assert client.get("/api/products").status_code == 429  # the same address, no token: the same budget


@pytest.mark.parametrize("app_overrides", LIMITED)
def test_a_customers_token_keeps_a_budget_of_its_own_at_a_limited_address(
    client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    assert [client.get("/api/products", headers=random_token()).status_code for _ in range(4)][-1] == 429
    assert [client.get("/api/products", headers=ALICE).status_code for _ in range(4)] == [200, 200, 200, 429]
    assert client.get("/api/products", headers=BOB).status_code == 200  # and each customer has one


@pytest.mark.parametrize("app_overrides", LIMITED)
def test_a_request_looks_its_token_up_once_for_the_limit_and_the_view(
    app: Flask, client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    lookups: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "token_hash" in statement:
            lookups.append(statement)

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        assert post_order(client, str(uuid.uuid4()), order_body()).status_code == 201
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert len(lookups) == 1


@pytest.mark.parametrize("app_overrides", LIMITED)
def test_a_replay_reads_its_token_and_its_record_in_one_transaction(
    app: Flask, client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    """The limit's read of the token is the request's own transaction: no ROLLBACK and BEGIN again before the view."""
    key = str(uuid.uuid4())
    assert post_order(client, key, order_body()).status_code == 201
    transactions: list[list[str]] = []

    def began(_conn: Any) -> None:
        transactions.append([])

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if transactions:
            transactions[-1].append(statement)

    with app.app_context():
        engine = db.engine
    event.listen(engine, "begin", began)
    event.listen(engine, "before_cursor_execute", record)
    try:
        assert post_order(client, key, order_body()).headers["Idempotent-Replayed"] == "true"
    finally:
        event.remove(engine, "begin", began)
        event.remove(engine, "before_cursor_execute", record)
    reads = [statements for statements in transactions if any("token_hash" in s for s in statements)]
    assert len(reads) == 1 and any("FROM idempotency_records" in s for s in reads[0]), transactions
