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


# The lab off: its log of the requests under a key writes a row as each arrives, in the request's session.
@pytest.mark.parametrize("app_overrides", [{**LIMITED[0], "CHECKOUT_LAB": False}])
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


def transaction_at_each_count(app: Flask, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether a database transaction is open each time the limit counts a request (in memory, or in Redis)."""
    seen: list[bool] = []
    limiter = app.extensions["checkout.limiter"]
    for strategy in {limiter._limiter, limiter._fallback_limiter} - {None}:
        real_hit = strategy.hit

        def hit(*args: Any, real_hit: Any = real_hit, **kwargs: Any) -> Any:
            seen.append(db.session().in_transaction())
            return real_hit(*args, **kwargs)

        monkeypatch.setattr(strategy, "hit", hit)
    return seen


@pytest.mark.parametrize(
    "app_overrides", [{"CHECKOUT_RATE_LIMIT": "100 per minute", "CHECKOUT_REDIS_URL": "redis://127.0.0.1:1/3"}]
)
def test_a_limit_counted_in_redis_never_waits_with_the_tokens_transaction_open(
    app: Flask, client: FlaskClient, app_overrides: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis may hang: its count comes after the token's read has ended (a payment then begins its own)."""
    seen = transaction_at_each_count(app, monkeypatch)
    assert post_order(client, str(uuid.uuid4()), order_body()).status_code == 201
    assert seen and not any(seen)  # Redis that does not answer, then the memory it falls back to


@pytest.mark.parametrize("app_overrides", LIMITED)
def test_a_view_that_may_call_out_first_gets_no_transaction_from_the_tokens_read(
    app: Flask, client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    """Only the API's views, which begin with the engine's look or a unit of work, read on in the token's read.
    The lab's messages page asks RabbitMQ before it reads anything."""
    transactions: list[bool] = []
    real_view = app.view_functions["messages.page"]

    def view(*args: Any, **kwargs: Any) -> Any:
        transactions.append(db.session().in_transaction())
        return real_view(*args, **kwargs)

    app.view_functions["messages.page"] = view
    try:
        client.get("/lab/messages", headers=ALICE)
    finally:
        app.view_functions["messages.page"] = real_view
    assert transactions == [False]
