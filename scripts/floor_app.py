"""The floor of ``make bench``: the least a Flask app can do for the writes of one paid order.

    python -c 'import scripts.floor_app as f, os; f.prepare(os.environ["DATABASE_URL"])'   # its tables, once
    gunicorn --config gunicorn.conf.py "scripts.floor_app:create_app()"    # DATABASE_URL as for the shop

``POST /api/orders`` here reads the bearer token (one indexed read), parses the JSON body, and in two
transactions writes what the shop's payment writes: the order and its items with the stock taken, then the
charge and the order marked paid. No idempotency, no session, no hooks, no audit, no gateway, no email: it can
charge twice and shows nothing. It is what "protected costs N times the floor" is measured against.
It keeps its own tables (``floor_*``), beside the shop's in the same database.
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from flask import Flask, Response, request

metadata = sa.MetaData()
customers = sa.Table(
    "floor_customers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("token", sa.String(64), nullable=False, unique=True),
)
stock = sa.Table(
    "floor_stock",
    metadata,
    sa.Column("sku", sa.String(32), primary_key=True),
    sa.Column("price_cents", sa.Integer, nullable=False),
    sa.Column("available", sa.Integer, nullable=False),
)
orders = sa.Table(
    "floor_orders",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("public_id", sa.String(40), nullable=False, unique=True),
    sa.Column("customer_id", sa.Integer, nullable=False),
    sa.Column("email", sa.String(254), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("total_cents", sa.Integer, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
items = sa.Table(
    "floor_items",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("order_id", sa.Integer, nullable=False),
    sa.Column("sku", sa.String(32), nullable=False),
    sa.Column("quantity", sa.Integer, nullable=False),
    sa.Column("unit_price_cents", sa.Integer, nullable=False),
)
charges = sa.Table(
    "floor_charges",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("order_id", sa.Integer, nullable=False),
    sa.Column("amount_cents", sa.Integer, nullable=False),
    sa.Column("card_last4", sa.String(4), nullable=False),
)

TOKEN = "demo-alice-token"
STOCK = 10**9  # never runs out during a benchmark


def _engine(url: str) -> sa.Engine:
    if not url.startswith("sqlite"):
        return sa.create_engine(url)
    # SQLite with several writers: wait for the lock, and take it when the transaction begins (as the shop does).
    engine = sa.create_engine(url, connect_args={"timeout": 30, "isolation_level": None})

    @sa.event.listens_for(engine, "connect")
    def _wal(connection: Any, _record: Any) -> None:
        connection.execute("PRAGMA journal_mode=WAL")

    @sa.event.listens_for(engine, "begin")
    def _immediate(connection: sa.Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def prepare(url: str) -> None:
    """Create and seed the floor's tables, once, before the workers start (two workers racing to
    CREATE TABLE collide on PostgreSQL's catalogue, whatever ``checkfirst`` says)."""
    engine = _engine(url)
    metadata.create_all(engine)
    with engine.begin() as connection:
        if connection.scalar(sa.select(sa.func.count()).select_from(customers)) == 0:
            connection.execute(customers.insert(), {"token": TOKEN})
            connection.execute(stock.insert(), [{"sku": "MUG-01", "price_cents": 1400, "available": STOCK}])
    engine.dispose()


def create_app() -> Flask:
    engine = _engine(os.environ["DATABASE_URL"])
    app = Flask(__name__)

    @app.post("/api/orders")
    def place() -> Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        body = json.loads(request.get_data())
        with engine.begin() as connection:  # the order, its items, the stock taken
            customer = connection.scalar(sa.select(customers.c.id).where(customers.c.token == token))
            if customer is None:
                return Response(status=401)
            total = 0
            lines = []
            for line in body["items"]:
                price = connection.scalar(
                    sa.update(stock)
                    .where(stock.c.sku == line["sku"], stock.c.available >= line["quantity"])
                    .values(available=stock.c.available - line["quantity"])
                    .returning(stock.c.price_cents)
                )
                lines.append({"sku": line["sku"], "quantity": line["quantity"], "unit_price_cents": price})
                total += price * line["quantity"]
            order_id = connection.scalar(
                orders.insert().returning(orders.c.id),
                {
                    "public_id": "ord_" + secrets.token_hex(8),
                    "customer_id": customer,
                    "email": body["email"],
                    "status": "pending",
                    "total_cents": total,
                    "created_at": datetime.now(UTC),
                },
            )
            connection.execute(items.insert(), [{"order_id": order_id, **line} for line in lines])
        with engine.begin() as connection:  # the charge, and the order paid
            connection.execute(
                charges.insert(),
                {"order_id": order_id, "amount_cents": total, "card_last4": body["card_number"][-4:]},
            )
            connection.execute(sa.update(orders).where(orders.c.id == order_id).values(status="paid"))
        answer = {"id": order_id, "status": "paid", "total_cents": total, "items": lines}
        return Response(json.dumps(answer), status=201, mimetype="application/json")

    @app.get("/api/products")
    def products() -> Response:  # what the benchmark waits for before it starts
        return Response("[]", mimetype="application/json")

    return app
