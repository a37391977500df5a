"""The reconciliation report: the shop's ledger against the gateway's, line by line.

With a gateway that takes keys, a payment cannot be charged twice. With one
that takes none (the legacy interface), a worker stalled past its lease, or a
shop that retries without looking first, can leave the two ledgers
disagreeing. Real providers send a settlement file for this; here both
ledgers are at hand. The report lists every disagreement, of three kinds:

- a paid order without a charge: the shop says paid, and the gateway has no
  succeeded charge of that order under the charge id the order records;
- a charge without a paid order: a succeeded charge that no paid order
  accounts for (its reference is unknown, its order is not paid, or the
  order is paid by another charge: a second charge for one order);
- amounts that differ: the order and the charge it records disagree on the
  amount or the currency.

A payment still in progress (charged, its answer lost, not yet retried) shows
as a charge without a paid order until it is finished: the report tells what
is true now. ``flask --app checkout gateway reconcile-report`` prints it and
exits 1 when it finds anything; the lab shows it at ``/lab/reconciliation``.
The gateway knows nothing of orders: only the shop can compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from checkout.extensions import db
from checkout.gateway import SUCCEEDED, GatewayCharge
from checkout.shop.models import WAS_PAID, Order
from checkout.shop.money import format_money

PAID_WITHOUT_CHARGE = "paid order without a charge"
CHARGE_WITHOUT_PAID_ORDER = "charge without a paid order"
AMOUNTS_DIFFER = "amounts that differ"
KINDS = (PAID_WITHOUT_CHARGE, CHARGE_WITHOUT_PAID_ORDER, AMOUNTS_DIFFER)


@dataclass(frozen=True)
class Discrepancy:
    kind: str
    order_id: str | None
    charge_id: str | None
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: order={self.order_id or '-'} charge={self.charge_id or '-'}: {self.detail}"


@dataclass(frozen=True)
class Report:
    paid_orders: int
    succeeded_charges: int
    discrepancies: list[Discrepancy] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.discrepancies

    def of_kind(self, kind: str) -> list[Discrepancy]:
        return [d for d in self.discrepancies if d.kind == kind]

    def summary(self) -> str:
        compared = f"{self.paid_orders} paid orders and {self.succeeded_charges} succeeded charges compared"
        if self.clean:
            return f"{compared}: the ledgers agree"
        counts = ", ".join(f"{len(self.of_kind(kind))} {kind}" for kind in KINDS if self.of_kind(kind))
        found = len(self.discrepancies)
        return f"{compared}: {found} discrepanc{'y' if found == 1 else 'ies'} ({counts})"


def _money(cents: int, currency: str) -> str:
    return format_money(cents, currency) if currency else f"{cents} (no currency)"


def _paid_orders() -> tuple[int, list[Discrepancy]]:
    """Each paid order against the charge it records."""
    rows = db.session.execute(
        sa.select(
            Order.public_id,
            Order.charge_id,
            Order.total_cents,
            Order.currency,
            GatewayCharge.id.label("found"),
            GatewayCharge.status,
            GatewayCharge.reference,
            GatewayCharge.amount_cents,
            GatewayCharge.currency.label("charge_currency"),
        )
        .outerjoin(GatewayCharge, GatewayCharge.id == Order.charge_id)
        .where(Order.status.in_(WAS_PAID))
        .order_by(Order.created_at, Order.id)
    ).all()
    found: list[Discrepancy] = []
    for row in rows:
        if row.charge_id is None:
            found.append(Discrepancy(PAID_WITHOUT_CHARGE, row.public_id, None, "the order records no charge"))
        elif row.found is None:
            found.append(
                Discrepancy(PAID_WITHOUT_CHARGE, row.public_id, row.charge_id, "the gateway has no such charge")
            )
        elif row.status != SUCCEEDED:
            found.append(Discrepancy(PAID_WITHOUT_CHARGE, row.public_id, row.charge_id, f"the charge is {row.status}"))
        elif row.reference != row.public_id:
            found.append(
                Discrepancy(
                    PAID_WITHOUT_CHARGE,
                    row.public_id,
                    row.charge_id,
                    f"the charge belongs to another reference ({row.reference})",
                )
            )
        elif (row.amount_cents, row.charge_currency) != (row.total_cents, row.currency):
            found.append(
                Discrepancy(
                    AMOUNTS_DIFFER,
                    row.public_id,
                    row.charge_id,
                    f"the order is for {_money(row.total_cents, row.currency)}, the charge took "
                    f"{_money(row.amount_cents, row.charge_currency)}",
                )
            )
    return len(rows), found


def _succeeded_charges() -> tuple[int, list[Discrepancy]]:
    """Each succeeded charge against the order of its reference."""
    rows = db.session.execute(
        sa.select(
            GatewayCharge.id,
            GatewayCharge.reference,
            GatewayCharge.amount_cents,
            GatewayCharge.currency,
            Order.status,
            Order.charge_id,
        )
        .outerjoin(Order, Order.public_id == GatewayCharge.reference)
        .where(GatewayCharge.status == SUCCEEDED)
        .order_by(GatewayCharge.created_at, GatewayCharge.id)
    ).all()
    found: list[Discrepancy] = []
    for row in rows:
        took = f"it took {_money(row.amount_cents, row.currency)}"
        if row.status is None:
            detail = f"the shop has no order {row.reference}; {took}"
        elif row.status not in WAS_PAID:
            detail = f"its order is {row.status}; {took}"
        elif row.charge_id != row.id:
            detail = f"its order is paid by {row.charge_id or 'no charge'}: this is one more charge; {took}"
        else:
            continue
        found.append(Discrepancy(CHARGE_WITHOUT_PAID_ORDER, row.reference, row.id, detail))
    return len(rows), found


def reconciliation_report() -> Report:
    paid, order_side = _paid_orders()
    charges, gateway_side = _succeeded_charges()
    return Report(paid, charges, order_side + gateway_side)
