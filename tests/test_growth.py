"""Growth without bound: purged keys take their audit events with them, old events are purged by
age, and the tables that grow forever have 64-bit ids."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.audit import IdempotencyEvent, IdempotencyRecord
from checkout.database import utcnow
from checkout.extensions import db, once
from tests.conftest import POSTGRES_URL
from tests.helpers import Ledger, expire_every_record, post_order

GROWING_TABLES = ["idempotency_records", "idempotency_events", "orders", "order_items", "customers"]


def test_purge_removes_the_audit_events_of_the_records_it_purges(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    post_order(client, "purged-key-000000001")
    post_order(client, "kept-key-00000000001")
    with app.app_context():
        db.session.execute(
            sa.update(IdempotencyRecord)
            .where(IdempotencyRecord.key == "purged-key-000000001")
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
        db.session.commit()
    assert "purged 1" in runner.invoke(args=["idempotency", "purge"]).output
    keys = {e.key for e in ledger.rows(IdempotencyEvent)}
    assert keys == {"kept-key-00000000001"}


def test_purge_removes_audit_events_older_than_the_key_lifetime(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    post_order(client, "old-events-key-00001")
    with app.app_context():  # events of a key whose record is long gone (purged by an older version)
        db.session.execute(sa.delete(IdempotencyRecord))
        db.session.execute(sa.update(IdempotencyEvent).values(created_at=utcnow() - timedelta(days=30)))
        db.session.commit()
    runner.invoke(args=["idempotency", "purge"])
    assert ledger.rows(IdempotencyEvent) == []


def test_purge_works_through_a_backlog_in_short_batches_and_keeps_the_unexpired(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    for n in range(5):
        post_order(client, f"backlog-key-{n:08d}")
    expire_every_record(app)
    post_order(client, "kept-key-00000000002")
    with app.app_context():
        assert once.store.purge(batch=2) == 5  # three batches: 2, 2, 1
        db.session.remove()
    assert [r.key for r in ledger.records()] == ["kept-key-00000000002"]
    assert {e.key for e in ledger.rows(IdempotencyEvent)} == {"kept-key-00000000002"}


@pytest.mark.parametrize("table", GROWING_TABLES)
def test_tables_that_grow_without_bound_have_64_bit_ids(app: Flask, table: str) -> None:
    with app.app_context():
        column = db.metadata.tables[table].c.id
        assert isinstance(column.type, sa.BigInteger)  # on SQLite a variant: INTEGER PRIMARY KEY is 64-bit there
        if db.engine.dialect.name == "postgresql":
            data_type = db.session.scalar(
                sa.text(
                    "SELECT data_type FROM information_schema.columns WHERE table_schema = current_schema() "
                    "AND table_name = :table AND column_name = 'id'"
                ),
                {"table": table},
            )
            db.session.rollback()
            assert data_type == "bigint"


@pytest.mark.skipif(not POSTGRES_URL, reason="needs PostgreSQL: SQLite's INTEGER PRIMARY KEY is 64-bit already")
def test_orders_keep_working_past_the_32_bit_end_of_the_id_sequences(app: Flask, client: FlaskClient) -> None:
    with app.app_context():
        for table in GROWING_TABLES:
            db.session.execute(sa.text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), 2147483646)"))
        db.session.commit()
    for number in range(3):
        assert post_order(client, f"past-32-bits-key-{number:04d}").status_code == 201
