"""The gateway's own ledger. It lives in the shop's database only because the
gateway is a mock; it is written on its own connection, in its own
transactions, as if it were a remote provider's."""

from __future__ import annotations

from datetime import datetime

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
        # The last line of defence: one succeeded charge per merchant reference (order).
        sa.Index(
            "uq_gateway_charges_one_succeeded_per_reference",
            "reference",
            unique=True,
            sqlite_where=sa.text("status = 'succeeded'"),
            postgresql_where=sa.text("status = 'succeeded'"),
        ),
        sa.CheckConstraint(f"status IN {CHARGE_STATES!r}", name="status"),
        # A charge moves money; only a void (which moves none) has an amount of zero.
        sa.CheckConstraint(f"amount_cents > 0 OR status = '{VOIDED}'", name="amount_positive"),
    )

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    gateway_key: Mapped[str] = mapped_column(sa.String(255))
    reference: Mapped[str] = mapped_column(sa.String(64))
    amount_cents: Mapped[int]
    currency: Mapped[str] = mapped_column(sa.String(3))
    status: Mapped[str] = mapped_column(sa.String(16))
    card_last4: Mapped[str] = mapped_column(sa.String(4))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class GatewayFaultMark(Base):
    """ "This gateway key has failed once already", for the fault cards.

    It must live in the database: with several workers, the retry lands on
    another process.
    """

    __tablename__ = "gateway_fault_marks"

    gateway_key: Mapped[str] = mapped_column(sa.String(255), primary_key=True)
    fault: Mapped[str] = mapped_column(sa.String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
