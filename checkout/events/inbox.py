"""The inbox: a consumer's record of the messages it has handled, unique on (consumer, message id).

A broker delivers at least once: a consumer killed after its work committed and before its ack gets the same
message again. The handler inserts the message id into the inbox in the transaction that does the work; a copy
finds the id there and does nothing. Every delivery, first or not, is kept too: the lab shows them.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from checkout.database import Base, BigId, UTCDateTime, insert_ignoring_conflicts, utcnow
from checkout.events.broker import Delivery
from checkout.extensions import db


class InboxMessage(Base):
    __tablename__ = "inbox_messages"

    consumer: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    message_id: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class EventDelivery(Base):
    """One delivery of a message to a consumer, and what came of it."""

    __tablename__ = "event_deliveries"
    __table_args__ = (sa.Index("ix_event_deliveries_consumer_id", "consumer", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    consumer: Mapped[str] = mapped_column(sa.String(64))
    message_id: Mapped[str] = mapped_column(sa.String(128))
    redelivered: Mapped[bool]  # the broker's flag: delivered before, and not acked
    outcome: Mapped[str] = mapped_column(sa.String(16))
    delivered_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


def first_delivery(consumer: str, message_id: str) -> bool:
    """In the handler's unit of work: True if this consumer never handled ``message_id`` (the inbox row is now
    ours, committed with the work), False for a copy. Two copies at once: the database lets one insert win."""
    inserted = db.session.execute(
        insert_ignoring_conflicts(InboxMessage, db.session, returning=[InboxMessage.message_id]),
        {"consumer": consumer, "message_id": message_id, "received_at": utcnow()},
    ).first()
    return inserted is not None


def note_delivery(consumer: str, delivery: Delivery, outcome: str) -> None:
    db.session.execute(
        sa.insert(EventDelivery).values(
            consumer=consumer,
            message_id=delivery.message_id[:128],
            redelivered=delivery.redelivered,
            outcome=outcome,
            delivered_at=utcnow(),
        )
    )
