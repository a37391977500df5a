"""The record table, on the app's own metadata so that its migrations carry it. A record is one operation, unique on
(customer, endpoint, key): the database itself refuses a second claim. In progress, it carries a lease (owner token,
worker, expiry) and a recovery point; completed, the response to replay."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from .types import COMPLETED, IN_PROGRESS

# 64-bit ids for a table that grows without bound (SQLite's INTEGER PRIMARY KEY is 64-bit already, and the only
# type it autoincrements).
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """An aware UTC datetime on every database (SQLite keeps no time zone: what it gives back was written as UTC)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime; use an aware one (units.utcnow())")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def record_columns() -> list[sa.Column[object]]:
    """What a record holds (a store over another table keeps the same columns)."""
    string = sa.String
    return [
        sa.Column("id", BigId, primary_key=True),
        sa.Column("customer", string(64), nullable=False),
        sa.Column("endpoint", string(100), nullable=False),
        sa.Column("key", string(255), nullable=False),
        sa.Column("fingerprint", string(64), nullable=False),
        sa.Column("state", string(16), nullable=False, default=IN_PROGRESS),
        sa.Column("recovery_point", string(32), nullable=False),
        sa.Column("locked_by", string(64)),  # the lease: the holder's random token, and until when
        sa.Column("worker", string(64)),  # the process (host:pid) holding the lease, for support
        sa.Column("locked_until", UTCDateTime()),
        sa.Column("reference", string(64)),  # what the operation made (an order's id), for a duplicate's answer
        sa.Column("duplicates", sa.Integer, nullable=False, default=0, server_default="0"),
        sa.Column("response_status", sa.Integer),
        sa.Column("response_headers", sa.JSON),
        sa.Column("response_body", sa.LargeBinary),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("completed_at", UTCDateTime()),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
    ]


def record_table(metadata: sa.MetaData, name: str = "idempotency_records") -> sa.Table:
    """The records' table on ``metadata`` (the one already there, if it is)."""
    if name in metadata.tables:
        return metadata.tables[name]
    return sa.Table(
        name,
        metadata,
        *record_columns(),
        sa.UniqueConstraint("customer", "endpoint", "key"),  # the database itself refuses a second claim
        sa.CheckConstraint(f"state IN ('{IN_PROGRESS}', '{COMPLETED}')", name="state"),
        sa.Index(f"ix_{name}_expires_at", "expires_at"),
    )
