"""Invariants of the spec that hold for any input: no 5xx, no card number kept, migrations match."""

from __future__ import annotations

import json
import logging
import re
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkout.extensions import db
from checkout.idempotency import Event
from checkout.shop.refunds import RefundEvent
from tests.helpers import ALICE, ANSWER_LOST_CARD, DECLINED_CARD, GOOD_CARD, UNAVAILABLE_CARD, order_body

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries({"items": json_values, "email": json_values, "card_number": json_values}),
    st.fixed_dictionaries(
        {
            "items": st.lists(st.fixed_dictionaries({"sku": json_values, "quantity": json_values}), max_size=3),
            "email": st.sampled_from(["a@example.com", "", "x"]),
            "card_number": st.sampled_from([GOOD_CARD, "4242", "", "4242-4242-4242-4242", "abcd"]),
        }
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies, key=st.one_of(st.none(), st.text(max_size=300), st.uuids().map(str)))
def test_no_malformed_order_produces_a_5xx(client: FlaskClient, body: Any, key: str | None) -> None:
    headers = dict(ALICE)
    if key is not None:
        headers["Idempotency-Key"] = key.encode("ascii", "ignore").decode().replace("\n", "").replace("\r", "")
    response = client.post("/api/orders", data=json.dumps(body), content_type="application/json", headers=headers)
    assert response.status_code < 500
    if response.status_code >= 400:
        assert response.mimetype == "application/problem+json"
        assert {"type", "title", "status", "detail"} <= set(response.get_json())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200), content_type=st.sampled_from(["application/json", "text/plain", ""]))
def test_no_malformed_bytes_produce_a_5xx(client: FlaskClient, raw: bytes, content_type: str) -> None:
    response = client.post(
        "/api/orders", data=raw, content_type=content_type, headers={**ALICE, "Idempotency-Key": str(uuid.uuid4())}
    )
    assert response.status_code < 500


def test_no_full_card_number_is_stored_or_logged(
    app: Flask, client: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    cards = [GOOD_CARD, DECLINED_CARD, UNAVAILABLE_CARD, ANSWER_LOST_CARD]
    for card in cards:
        key = str(uuid.uuid4())
        for _attempt in range(2):  # the fault cards need a retry to finish
            client.post("/api/orders", json=order_body(card=card), headers={**ALICE, "Idempotency-Key": key})
    with app.app_context():
        dump = []
        for table in db.metadata.sorted_tables:
            for row in db.session.execute(sa.select(table)):
                dump.append(repr(tuple(row)))
        db.session.rollback()
    everything = "\n".join(dump) + caplog.text
    for card in cards:
        digits = card.replace(" ", "")
        assert digits not in everything and card not in everything
    assert "4242" in everything  # last four digits are kept


def test_migrations_build_the_schema_the_models_describe(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from checkout import create_app

    url = f"sqlite:///{tmp_path / 'migrated.sqlite3'}"
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "k"})
    runner: FlaskCliRunner = app.test_cli_runner()
    upgrade = runner.invoke(args=["db", "upgrade"])
    assert upgrade.exit_code == 0, (upgrade.output, repr(upgrade.exception))
    check = runner.invoke(args=["db", "check"])
    assert check.exit_code == 0, check.output  # non-zero when the models and migrations differ
    with app.app_context():
        db.engine.dispose()


def test_the_lab_accounts_migration_moves_an_older_databases_orders_and_keeps_every_row(
    database_url: str, tmp_path: Any
) -> None:
    """b8e4d1f2a7c3 rebuilds orders and refunds (SQLite's batch copy): their rows, their children and the
    lab's paths must all survive it, and a keyless row get a key of its own."""
    from checkout import create_app

    app = create_app({"SQLALCHEMY_DATABASE_URI": database_url, "SECRET_KEY": "k"}, instance_path=str(tmp_path))
    runner: FlaskCliRunner = app.test_cli_runner()
    assert runner.invoke(args=["db", "upgrade", "a41c9e27d5b8"]).exit_code == 0
    now = "2026-12-01 10:00:00"
    with app.app_context(), db.engine.begin() as sql:
        for statement in (
            "INSERT INTO customers (id, public_id, name, token_hash, created_at) VALUES (1, 'cus_x', 'x', 'h', :now)",
            "INSERT INTO products (id, sku, name, description, emoji, price_cents, currency, stock, seeded_stock)"
            " VALUES (1, 'MUG-01', 'Mug', '', '', 1200, 'USD', 8, 10)",
            "INSERT INTO orders (id, public_id, customer_id, idempotency_key, gateway_key, status, email, card_last4,"
            " total_cents, currency, refunded_cents, cart_moved_on, path, purchase_ref, language, created_at,"
            " updated_at) VALUES (1, 'ord_a', 1, 'key-a', 'charge-ord_a', 'paid', 'a@x.io', '4242', 1200, 'USD',"
            " 100, false, 'safe', 'p-1', 'en', :now, :now), (2, 'ord_b', 1, NULL, 'unsafe-1', 'paid', 'a@x.io',"
            " '4242', 1200, 'USD', 0, false, 'unsafe', NULL, 'en', :now, :now)",
            "INSERT INTO order_items (id, order_id, sku, name, quantity, unit_price_cents) VALUES"
            " (1, 1, 'MUG-01', 'Mug', 1, 1200), (2, 2, 'MUG-01', 'Mug', 1, 1200)",
            "INSERT INTO refunds (id, public_id, order_id, idempotency_key, refund_key, amount_cents, currency,"
            " reason, status, path, created_at, updated_at) VALUES (1, 're_a', 1, NULL, 'refund-re_a', 100, 'USD',"
            " '', 'succeeded', 'unsafe', :now, :now)",
        ):
            sql.execute(sa.text(statement), {"now": now})
    upgrade = runner.invoke(args=["db", "upgrade"])
    assert upgrade.exit_code == 0, (upgrade.output, repr(upgrade.exception))
    with app.app_context(), db.engine.connect() as sql:
        assert sql.execute(sa.text("SELECT order_id, path, purchase_ref FROM lab_orders ORDER BY 1")).all() == [
            (1, "safe", "p-1"),
            (2, "unsafe", None),
        ]
        assert sql.execute(sa.text("SELECT refund_id, path FROM lab_refunds")).all() == [(1, "unsafe")]
        assert sql.execute(sa.text("SELECT sku, seeded FROM lab_stock")).all() == [("MUG-01", 10)]
        keys = sql.execute(sa.text("SELECT idempotency_key FROM orders ORDER BY id")).scalars().all()
        assert keys == ["key-a", "lab-2"]
        assert sql.execute(sa.text("SELECT count(*) FROM order_items")).scalar() == 2
        assert sql.execute(sa.text("SELECT idempotency_key FROM refunds")).scalar() == "lab-1"
    with app.app_context():
        db.engine.dispose()


def test_every_state_a_check_allows_fits_its_column() -> None:
    """SQLite ignores a VARCHAR's length and PostgreSQL does not: a state too long fails only there."""
    too_long = []
    for table in db.metadata.tables.values():
        for constraint in table.constraints:
            found = re.fullmatch(r"(\w+) IN \((.*)\)", str(getattr(constraint, "sqltext", "")))
            if found:
                column = table.c[found.group(1)]
                for value in re.findall(r"'([^']*)'", found.group(2)):
                    if len(value) > column.type.length:
                        too_long.append(f"{table.name}.{column.name}: {value!r}")
    event_name = db.metadata.tables["idempotency_events"].c.name
    too_long += [name for name in [*Event, *RefundEvent] if len(name) > event_name.type.length]
    assert too_long == []
