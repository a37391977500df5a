"""Late retries and abandoned payments on the lab's Redis store (POST /api/lab/stores/redis/orders).

Its records live in Redis, outside the order's transaction: Redis may forget a key, and a worker that
dies leaves no record in the database for reconcile to find. What holds is the orders table: its
unique (customer, idempotency key) answers a retry with the order the key placed, and reconcile finds
pending orders nobody is working on and finishes them by asking the gateway behind a fence."""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.database import utcnow
from checkout.extensions import db
from checkout.lab.redis_store import PREFIX
from checkout.shop.models import Order
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    order_body,
    stock_of,
    stock_out_of_balance,
)
from tests.redis_server import client_for, flush

ROUTE = "/api/lab/stores/redis/orders"
LAST_ITEM = [{"sku": "LAST-01", "quantity": 1}]  # the seed's product with a stock of 1, listed last


@pytest.fixture
def app_overrides(redis_url: str) -> dict[str, Any]:
    return {"CHECKOUT_REDIS_URL": redis_url}


def post(client: FlaskClient, key: str, body: dict[str, Any]) -> Any:
    return client.post(ROUTE, json=body, headers={**ALICE, "Idempotency-Key": key})


def age_every_order(app: Flask, seconds: float = 3600) -> None:
    """Let time pass for the orders: placed, and last touched, long ago (far more than a lease)."""
    past = utcnow() - timedelta(seconds=seconds)
    with app.app_context():
        db.session.execute(sa.update(Order).values(created_at=past, updated_at=past))
        db.session.commit()


def reconcile(runner: FlaskCliRunner) -> str:
    result = runner.invoke(args=["idempotency", "reconcile"])
    assert result.exit_code == 0, result.output
    return str(result.output)


# --- a late retry after Redis forgot the key ------------------------------------------------------


def test_after_redis_forgets_the_key_of_the_paid_last_item_the_retry_gets_the_order_not_out_of_stock(
    app: Flask, client: FlaskClient, ledger: Ledger, redis_url: str
) -> None:
    key = f"redis-last-item-{uuid.uuid4().hex[:8]}"
    first = post(client, key, order_body(items=LAST_ITEM))
    assert first.status_code == 201 and stock_of(app, "LAST-01") == 0
    flush(redis_url)  # Redis loses the key: restarted without persistence, evicted, flushed
    late = post(client, key, order_body(items=LAST_ITEM))
    assert late.status_code == 201, late.get_json()
    assert late.get_data() == first.get_data()
    [order] = ledger.orders()
    assert (order.public_id, order.status) == (first.get_json()["id"], "paid")
    assert [c.reference for c in ledger.succeeded_charges()] == [order.public_id]
    assert stock_of(app, "LAST-01") == 0 and stock_out_of_balance(app) == {}


# --- reconcile: pending orders whose record is not in the database ------------------------------------


def test_reconcile_fails_an_abandoned_redis_payment_the_gateway_never_charged_and_gives_its_stock_back_once(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    key = f"redis-abandoned-{uuid.uuid4().hex[:8]}"
    assert post(client, key, order_body(UNAVAILABLE_CARD, items=LAST_ITEM)).status_code == 503  # never came back
    assert stock_of(app, "LAST-01") == 0  # the pending order holds the last lamp
    age_every_order(app)
    output = reconcile(runner)
    assert "failed" in output and f"key={key}" in output and "reconciled 1" in output
    [order] = ledger.orders()
    assert order.status == "failed"
    assert [c.status for c in ledger.charges()] == ["voided"]  # the fence on the order's gateway key
    assert stock_of(app, "LAST-01") == 1 and stock_out_of_balance(app) == {}
    assert "reconciled 0" in reconcile(runner)  # again: nothing more to finish, nothing more given back
    assert stock_of(app, "LAST-01") == 1
    late = post(client, key, order_body(UNAVAILABLE_CARD, items=LAST_ITEM))  # the client comes back after all
    assert late.status_code == 402 and late.get_json()["type"] == "payment-abandoned"
    assert ledger.succeeded_charges() == []


def test_reconcile_marks_paid_a_redis_payment_the_gateway_charged_after_redis_forgot_its_key(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger, redis_url: str
) -> None:
    key = f"redis-charged-{uuid.uuid4().hex[:8]}"
    assert post(client, key, order_body(ANSWER_LOST_CARD)).status_code == 503  # charged; the answer lost
    flush(redis_url)  # ... and Redis forgot the record: nothing anywhere says the payment is unfinished
    age_every_order(app)
    assert "paid" in reconcile(runner)
    [order] = ledger.orders()
    [charge] = ledger.succeeded_charges()
    assert (order.status, order.charge_id) == ("paid", charge.id)
    assert stock_out_of_balance(app) == {}


def test_reconcile_leaves_a_pending_redis_payment_alone_until_its_lease_has_run_out(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger, redis_url: str
) -> None:
    assert post(client, f"redis-young-{uuid.uuid4().hex[:8]}", order_body(UNAVAILABLE_CARD)).status_code == 503
    flush(redis_url)
    assert "reconciled 0" in reconcile(runner)  # placed a moment ago: its worker may still be at it
    assert [o.status for o in ledger.orders()] == ["pending"] and ledger.charges() == []


def test_reconcile_leaves_an_old_redis_payment_alone_while_a_worker_holds_its_lease_in_redis(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger, redis_url: str
) -> None:
    key = f"redis-taken-over-{uuid.uuid4().hex[:8]}"
    assert post(client, key, order_body(UNAVAILABLE_CARD)).status_code == 503
    age_every_order(app)
    redis = client_for(redis_url)
    [name] = list(redis.scan_iter(match=PREFIX + "*"))
    record = json.loads(str(redis.get(name)))
    # A retry took the released lease over an hour after the order was placed, and is at the gateway now.
    record.update(owner="f" * 32, worker="elsewhere:1", locked_until=time.time() + 60)
    redis.set(name, json.dumps(record), keepttl=True)
    redis.close()
    assert "reconciled 0" in reconcile(runner)
    assert [o.status for o in ledger.orders()] == ["pending"] and ledger.charges() == []
