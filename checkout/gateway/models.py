"""The gateway's own ledger. It lives in the shop's database only because the
gateway is a mock; it is written on its own connection, in its own
transactions, as if it were a remote provider's."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from checkout.database import Base, UTCDateTime, utcnow

SUCCEEDED = "succeeded"
DECLINED = "declined"
# A gateway key fenced by the merchant (reconcile) before any charge landed under it:
# a charge attempted under it afterwards is refused.
VOIDED = "voided"
CHARGE_STATES = (SUCCEEDED, DECLINED, VOIDED)


class GatewayCharge(Base):
    __tablename__ = "gateway_charges"
    __table_args__ = (
        sa.UniqueConstraint("gateway_key"),
        # The last line of defence of the keyed interface: one succeeded charge per merchant reference
        # (order). The legacy interface (checkout.gateway.legacy) has no such line: it charges on every call.
        sa.Index(
            "uq_gateway_charges_one_succeeded_per_reference",
            "reference",
            unique=True,
            sqlite_where=sa.text("status = 'succeeded' AND keyed"),
            postgresql_where=sa.text("status = 'succeeded' AND keyed"),
        ),
        sa.CheckConstraint(f"status IN {CHARGE_STATES!r}", name="status"),
        # A charge moves money; only a void (which moves none) has an amount of zero.
        sa.CheckConstraint(f"amount_cents > 0 OR status = '{VOIDED}'", name="amount_positive"),
        # The gateway's own rule: never more refunded than charged.
        sa.CheckConstraint("refunded_cents >= 0 AND refunded_cents <= amount_cents", name="refunded_within_amount"),
    )

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    gateway_key: Mapped[str] = mapped_column(sa.String(255))
    reference: Mapped[str] = mapped_column(sa.String(64))
    amount_cents: Mapped[int]
    currency: Mapped[str] = mapped_column(sa.String(3))
    status: Mapped[str] = mapped_column(sa.String(16))
    card_last4: Mapped[str] = mapped_column(sa.String(4))
    refunded_cents: Mapped[int] = mapped_column(default=0, server_default="0")
    # Made through the keyed (idempotent) interface; false for the legacy interface, which takes no key
    # and stores an internal one of its own that it never shows.
    keyed: Mapped[bool] = mapped_column(default=True, server_default=sa.true())
    # Test mode: how the test card behaves, so a refund of a charge made with a fault card meets the fault.
    behaviour: Mapped[str] = mapped_column(sa.String(20), default="", server_default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class GatewayRefund(Base):
    """Money the gateway gave back, idempotent on the merchant's refund key."""

    __tablename__ = "gateway_refunds"
    __table_args__ = (sa.CheckConstraint("amount_cents > 0", name="amount_positive"),)

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    refund_key: Mapped[str] = mapped_column(sa.String(255), unique=True)
    charge_id: Mapped[str] = mapped_column(sa.String(32), sa.ForeignKey("gateway_charges.id"), index=True)
    reference: Mapped[str] = mapped_column(sa.String(64))
    amount_cents: Mapped[int]
    currency: Mapped[str] = mapped_column(sa.String(3))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class GatewayEvent(Base):
    """What the gateway tells the merchant, by webhook, at least once: one row per outcome,
    written in the transaction of the outcome, delivered until the merchant answers 2xx."""

    __tablename__ = "gateway_events"
    __table_args__ = (sa.Index("ix_gateway_events_due", "delivered_at", "next_attempt_at"),)

    id: Mapped[str] = mapped_column(sa.String(40), primary_key=True)
    type: Mapped[str] = mapped_column(sa.String(40))
    created: Mapped[int]  # unix seconds, as in the event's JSON
    data: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    attempts: Mapped[int] = mapped_column(default=0, server_default="0")
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_status: Mapped[int | None]


class GatewayFaultMark(Base):
    """ "This gateway key has failed once already", for the fault cards.

    It must live in the database: with several workers, the retry lands on
    another process.
    """

    __tablename__ = "gateway_fault_marks"

    gateway_key: Mapped[str] = mapped_column(sa.String(255), primary_key=True)
    fault: Mapped[str] = mapped_column(sa.String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
