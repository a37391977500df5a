"""The events' outbox: one event per (kind, subject), written inside the unit of work that makes it true.

Whoever ends a payment first (the worker, reconcile, the gateway's webhook) writes it; the others change nothing.
The publisher (checkout.events.broker) sends it later, at least once, always with the same message id.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from checkout.database import Base, BigId, UTCDateTime, insert_ignoring_conflicts, utcnow
from checkout.extensions import db


class OutboxEvent(Base):
    __tablename__ = "outbox_events"
    __table_args__ = (
        sa.UniqueConstraint("kind", "subject"),  # one order.paid per order, whoever writes it first
        sa.Index("ix_outbox_events_unpublished", "published_at", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(40))  # the routing key: order.paid
    subject: Mapped[str] = mapped_column(sa.String(64))  # what it is about: the order's id
    body: Mapped[str] = mapped_column(sa.Text)  # JSON
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # Set once the broker confirmed it (publisher confirms); a publisher that dies before setting it publishes the
    # event again, with the same message id: the consumers' inboxes drop the copy.
    published_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(default=0, server_default="0")
    last_error: Mapped[str | None] = mapped_column(sa.String(300))


def message_id(kind: str, subject: str) -> str:
    """The message id of the outbox's one event of ``kind`` about ``subject``: the same on every publish."""
    return f"{kind}:{subject}"


def publish_later(kind: str, subject: str, payload: dict[str, Any]) -> None:
    """Add the event to the current unit of work, unless this (kind, subject) already has one."""
    db.session.execute(
        insert_ignoring_conflicts(OutboxEvent, db.session),
        {
            "kind": kind,
            "subject": subject,
            "body": json.dumps(payload, separators=(",", ":"), sort_keys=True),
            "created_at": utcnow(),
            "attempts": 0,
        },
    )
