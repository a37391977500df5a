"""Late retries and abandoned payments on the lab's Redis store (POST /api/lab/stores/redis/orders).

Its records live in Redis, outside the order's transaction: Redis may forget a key, and a worker that
dies leaves no record in the database for reconcile to find. What holds is the orders table: its
unique (customer, idempotency key) answers a retry with the order the key placed, and reconcile finds
pending orders nobody is working on and finishes them by asking the gateway behind a fence."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout.extensions import db
from checkout.shop.models import Product
from tests.helpers import (
    ALICE,
    Ledger,
    order_body,
    stock_out_of_balance,
)
from tests.redis_server import flush, own_redis_database

ROUTE = "/api/lab/stores/redis/orders"
LAST_ITEM = [{"sku": "LAST-01", "quantity": 1}]  # the seed's product with a stock of 1, listed last


@pytest.fixture
def redis_url() -> Iterator[str]:
    with own_redis_database() as url:
        yield url


@pytest.fixture
def app_overrides(redis_url: str) -> dict[str, Any]:
    return {"CHECKOUT_REDIS_URL": redis_url}


def post(client: FlaskClient, key: str, body: dict[str, Any]) -> Any:
    return client.post(ROUTE, json=body, headers={**ALICE, "Idempotency-Key": key})


def stock_of(app: Flask, sku: str) -> int:
    with app.app_context():
        value = db.session.scalar(sa.select(Product.stock).where(Product.sku == sku))
        db.session.remove()
    return int(value or 0)


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
