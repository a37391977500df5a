"""The idempotency record and its audit trail.

A record is one operation: (customer, endpoint, key) is unique, so the
database itself refuses a second claim. While in progress it carries a lease
(owner token, the worker holding it, an expiry) and a recovery point; once
completed it carries the response to replay.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from checkout.database import Base, BigId, UTCDateTime, utcnow
from checkout.idempotency.types import COMPLETED, IN_PROGRESS, STARTED


class RecordColumns:
    """What a record holds (the lab's wrong stores keep the same columns under other constraints)."""

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    customer: Mapped[str] = mapped_column(sa.String(64))
    endpoint: Mapped[str] = mapped_column(sa.String(100))
    key: Mapped[str] = mapped_column(sa.String(255))
    fingerprint: Mapped[str] = mapped_column(sa.String(64))
    state: Mapped[str] = mapped_column(sa.String(16), default=IN_PROGRESS)
    recovery_point: Mapped[str] = mapped_column(sa.String(32), default=STARTED)
    locked_by: Mapped[str | None] = mapped_column(sa.String(64))
    # The worker (host:pid) holding the lease: for support, and for the lab's exercise 5.
    worker: Mapped[str | None] = mapped_column(sa.String(64))
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # What the operation created (an order id), once it has: for 409 and 503 answers.
    reference: Mapped[str | None] = mapped_column(sa.String(64))
    # How many other requests with this key arrived while it ran.
    duplicates: Mapped[int] = mapped_column(default=0, server_default="0")
    response_status: Mapped[int | None]
    response_headers: Mapped[dict[str, str] | None] = mapped_column(sa.JSON)
    response_body: Mapped[bytes | None] = mapped_column(sa.LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class IdempotencyRecord(RecordColumns, Base):
    __tablename__ = "idempotency_records"
    __table_args__ = (
        sa.UniqueConstraint("customer", "endpoint", "key"),  # the database itself refuses a second claim
        sa.CheckConstraint(f"state IN ('{IN_PROGRESS}', '{COMPLETED}')", name="state"),
        sa.Index("ix_idempotency_records_expires_at", "expires_at"),
    )


class IdempotencyEvent(Base):
    """One step of one operation, for support and for the lab timeline."""

    __tablename__ = "idempotency_events"
    __table_args__ = (
        sa.Index("ix_idempotency_events_scope", "customer", "endpoint", "key"),
        sa.Index("ix_idempotency_events_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    customer: Mapped[str] = mapped_column(sa.String(64))
    endpoint: Mapped[str] = mapped_column(sa.String(100))
    key: Mapped[str] = mapped_column(sa.String(255))
    name: Mapped[str] = mapped_column(sa.String(32))
    worker: Mapped[str] = mapped_column(sa.String(64))
    detail: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)
