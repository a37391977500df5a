"""The outbox: a message per (kind, subject), written inside the unit of work that makes it true.

Whoever writes a message first (the worker finishing a payment, or the gateway's webhook) writes it; the other
changes nothing. The relay (checkout.mail.relay) sends it later, at least once.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from checkout.database import Base, BigId, UTCDateTime, insert_ignoring_conflicts, utcnow
from checkout.extensions import db

ORDER_CONFIRMATION = "order_confirmation"
REFUND_RECEIPT = "refund_receipt"


class OutboxMessage(Base):
    __tablename__ = "outbox_messages"
    __table_args__ = (
        # One confirmation per order, one receipt per refund, whoever writes it first (worker or webhook).
        sa.UniqueConstraint("kind", "subject"),
        sa.Index("ix_outbox_messages_unsent", "sent_at", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(40))
    subject: Mapped[str] = mapped_column(sa.String(64))  # the order or refund it is about
    recipient: Mapped[str] = mapped_column(sa.String(254))
    title: Mapped[str] = mapped_column(sa.String(200))
    body: Mapped[str] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(default=0, server_default="0")
    last_error: Mapped[str | None] = mapped_column(sa.String(300))
    # The mail server refused it for good (a 5xx, an address it cannot take, a message that cannot be
    # built): no relay takes it again, and last_error says why. A temporary refusal waits in claimed_until.
    refused_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # No relay takes the message before this: a relay claimed it to send it (a short lease, so two
    # relays never send it at once), or its last send failed and it waits out a backoff.
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime())


def enqueue(kind: str, subject: str, recipient: str, title: str, body: str) -> None:
    """Add a message to the current unit of work, unless this (kind, subject) already has one."""
    db.session.execute(
        insert_ignoring_conflicts(OutboxMessage, db.session),
        {
            "kind": kind,
            "subject": subject,
            "recipient": recipient,
            "title": title,
            "body": body,
            "created_at": utcnow(),
            "attempts": 0,
        },
    )
