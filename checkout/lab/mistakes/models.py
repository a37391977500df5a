"""The keys the wrong twins keep by hand, in three tables: each table's constraints are part of its story.

None of them is the safe engine's ``idempotency_records`` (unique on customer,
endpoint and key): the twins must not lean on the defence they are missing.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from checkout.database import Base, BigId, UTCDateTime, utcnow


class KeyColumns:
    """What a hand-rolled key store keeps: whose key, the request's fingerprint, its order, its answer."""

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    customer: Mapped[str] = mapped_column(sa.String(64))
    key: Mapped[str] = mapped_column(sa.String(255))
    fingerprint: Mapped[str | None] = mapped_column(sa.String(64))
    order_id: Mapped[str | None] = mapped_column(sa.String(32))
    response_status: Mapped[int | None]
    response_headers: Mapped[dict[str, str] | None] = mapped_column(sa.JSON)
    response_body: Mapped[bytes | None] = mapped_column(sa.LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class MistakeKey(KeyColumns, Base):
    """The store of the twins whose mistake lies elsewhere: one row per (twin, customer, key), claimed
    atomically with INSERT ... ON CONFLICT DO NOTHING, as the safe engine claims its records."""

    __tablename__ = "lab_mistake_keys"
    __table_args__ = (sa.UniqueConstraint("mistake", "customer", "key"),)

    mistake: Mapped[str] = mapped_column(sa.String(40))


class CheckThenInsertKey(KeyColumns, Base):
    """check-then-insert's store. THE MISTAKE, in the schema: no unique constraint, so nothing refuses
    a second row for the same (customer, key); only the SELECT before the INSERT looks for one."""

    __tablename__ = "lab_check_then_insert_keys"
    __table_args__ = (sa.Index("ix_lab_check_then_insert_keys_lookup", "customer", "key"),)


class UnscopedKey(KeyColumns, Base):
    """unscoped-key's store. THE MISTAKE, in the schema: unique on the key alone, not on (customer, key),
    so a key string belongs to whoever sent it first."""

    __tablename__ = "lab_unscoped_keys"
    __table_args__ = (sa.UniqueConstraint("key"),)
