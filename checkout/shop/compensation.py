"""Compensation: a charge that should not stand is refunded, once.

An orphan charge is one the gateway made for an order that ended unpaid (failed or declined). The shop's keyed
gateway cannot leave one (reconcile fences the key before it ends an order failed); a gateway that takes no key can:
a stalled worker's late charge lands after reconcile ended its order (checkout/lab/legacy.py). Reconcile, and
``flask --app checkout gateway compensate``, refund each under a key derived from the charge alone,
``compensate-<charge id>``: run twice, or killed between the refund and its record, the gateway refunds once. The
shop's record of it is unique on the charge.
Design: docs/design.md#checkoutshopcompensationpy-an-orphan-charge-refunded-once
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from checkout.database import Base, BigId, UTCDateTime, assert_idle, insert_ignoring_conflicts, reading, utcnow, writing
from checkout.extensions import db
from checkout.gateway import (
    SUCCEEDED,
    Gateway,
    GatewayCharge,
    GatewayTimeout,
    GatewayUnavailable,
    KeyReused,
    NoSuchCharge,
    Refund,
    RefundExceedsCharge,
)
from checkout.shop.models import DECLINED, FAILED, Order

ENDED_UNPAID = (FAILED, DECLINED)
REFUNDED = "compensated"  # the refund stands (now, or from an earlier run), and the shop has recorded it
WAITING = "waiting"  # the gateway was down or its answer lost: the next run asks again, under the same key
REFUSED = "refused"  # the gateway will not refund it (already refunded in part by hand): left to a person


class Compensation(Base):
    __tablename__ = "compensations"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    charge_id: Mapped[str] = mapped_column(sa.String(32), unique=True)  # one compensation per charge
    order_id: Mapped[str] = mapped_column(sa.String(64))  # the charge's reference: the order that ended unpaid
    refund_id: Mapped[str] = mapped_column(sa.String(32))
    amount_cents: Mapped[int]
    currency: Mapped[str] = mapped_column(sa.String(3))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


def compensation_key(charge_id: str) -> str:
    """The refund's key, derived from the charge and nothing else: every run asks for the same refund."""
    return f"compensate-{charge_id}"


@dataclass(frozen=True)
class Orphan:
    charge_id: str
    order_id: str
    order_status: str
    amount_cents: int
    currency: str


def orphans() -> list[Orphan]:
    """Succeeded charges whose order ended unpaid, not compensated yet."""
    query = (
        sa.select(GatewayCharge.id, Order.public_id, Order.status, GatewayCharge.amount_cents, GatewayCharge.currency)
        .join(Order, Order.public_id == GatewayCharge.reference)
        .where(
            GatewayCharge.status == SUCCEEDED,
            Order.status.in_(ENDED_UNPAID),
            GatewayCharge.id.not_in(sa.select(Compensation.charge_id)),
        )
        .order_by(GatewayCharge.created_at, GatewayCharge.id)
    )
    return [Orphan(*row) for row in db.session.execute(query).all()]


@dataclass(frozen=True)
class Compensated:
    orphan: Orphan
    outcome: str  # REFUNDED, WAITING or REFUSED
    refund_id: str | None = None
    detail: str = ""

    def __str__(self) -> str:
        parts = [f"{self.outcome:<11}", f"charge={self.orphan.charge_id}", f"order={self.orphan.order_id}"]
        if self.refund_id:
            parts.append(f"refund={self.refund_id}")
        return " ".join(parts) + (f": {self.detail}" if self.detail else "")


def compensate(
    gateway: Gateway, orphan: Orphan, *, after_refund: Callable[[Orphan, Refund], None] | None = None
) -> Compensated:
    """Refund the whole charge under its compensation key, then record it. The amount is the charge's, never what
    is left of it: a second run asks for the very same refund, and the gateway answers with the first."""
    assert_idle()  # nothing may wait on the gateway with a transaction open
    try:
        refund = gateway.refund(
            refund_key=compensation_key(orphan.charge_id),
            charge_id=orphan.charge_id,
            amount_cents=orphan.amount_cents,
            currency=orphan.currency,
        )
    except (GatewayUnavailable, GatewayTimeout) as later:
        return Compensated(orphan, WAITING, detail=str(later))
    except (RefundExceedsCharge, NoSuchCharge, KeyReused) as refused:
        return Compensated(orphan, REFUSED, detail=str(refused))
    if after_refund is not None:
        after_refund(orphan, refund)  # --crash-after-refund dies here: refunded at the gateway, not recorded
    with writing() as session:
        session.execute(
            insert_ignoring_conflicts(Compensation, session),
            {
                "charge_id": orphan.charge_id,
                "order_id": orphan.order_id,
                "refund_id": refund.id,
                "amount_cents": refund.amount_cents,
                "currency": refund.currency,
                "created_at": utcnow(),
            },
        )
    return Compensated(orphan, REFUNDED, refund.id)


def compensate_all(
    gateway: Gateway, *, after_refund: Callable[[Orphan, Refund], None] | None = None
) -> list[Compensated]:
    with reading():  # over before the gateway is asked
        found = orphans()
    return [compensate(gateway, orphan, after_refund=after_refund) for orphan in found]


def recent(limit: int = 20) -> list[Compensation]:
    """The latest compensations, newest first."""
    return list(db.session.scalars(sa.select(Compensation).order_by(Compensation.id.desc()).limit(limit)))
