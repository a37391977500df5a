"""The reconciliation report: the shop's ledger against the gateway's, line by line.

A gateway without keys can leave the two ledgers disagreeing; it knows nothing of orders, so only the shop can
compare. ``flask --app checkout gateway reconcile-report`` prints it; the lab shows it at ``/lab/reconciliation``.
Design: docs/design.md#checkoutshopreconciliation_reportpy-the-two-ledgers-compared
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from checkout.extensions import db
from checkout.gateway import SUCCEEDED, GatewayCharge
from checkout.i18n import N_, _, format_money, ngettext
from checkout.shop.labels import status_label
from checkout.shop.models import PAYMENT_SUCCEEDED, WAS_PAID, Order, Payment

# The kinds are identifiers too (the CLI prints them in English); the lab page shows them translated.
PAID_WITHOUT_CHARGE = N_("paid order without a charge")
CHARGE_WITHOUT_PAID_ORDER = N_("charge without a paid order")
AMOUNTS_DIFFER = N_("amounts that differ")
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
        """In the current language: English on the command line, the page's language in the lab."""
        compared = _(
            "%(orders)s paid orders and %(charges)s succeeded charges compared",
            orders=self.paid_orders,
            charges=self.succeeded_charges,
        )
        if self.clean:
            return _("%(compared)s: the ledgers agree", compared=compared)
        counts = ", ".join(f"{len(self.of_kind(kind))} {_(kind)}" for kind in KINDS if self.of_kind(kind))
        found = ngettext("%(num)d discrepancy", "%(num)d discrepancies", len(self.discrepancies))
        return f"{compared}: {found} ({counts})"


def _money(cents: int, currency: str) -> str:
    return format_money(cents, currency) if currency else _("%(cents)s (no currency)", cents=cents)


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
            found.append(Discrepancy(PAID_WITHOUT_CHARGE, row.public_id, None, _("the order records no charge")))
        elif row.found is None:
            found.append(
                Discrepancy(PAID_WITHOUT_CHARGE, row.public_id, row.charge_id, _("the gateway has no such charge"))
            )
        elif row.status != SUCCEEDED:
            detail = _("the charge is %(status)s", status=row.status)
            found.append(Discrepancy(PAID_WITHOUT_CHARGE, row.public_id, row.charge_id, detail))
        elif row.reference != row.public_id:
            found.append(
                Discrepancy(
                    PAID_WITHOUT_CHARGE,
                    row.public_id,
                    row.charge_id,
                    _("the charge belongs to another reference (%(reference)s)", reference=row.reference),
                )
            )
        elif (row.amount_cents, row.charge_currency) != (row.total_cents, row.currency):
            found.append(
                Discrepancy(
                    AMOUNTS_DIFFER,
                    row.public_id,
                    row.charge_id,
                    _(
                        "the order is for %(ordered)s, the charge took %(took)s",
                        ordered=_money(row.total_cents, row.currency),
                        took=_money(row.amount_cents, row.charge_currency),
                    ),
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
            Payment.status.label("payment_status"),
            Payment.charge_id.label("payment_charge_id"),
        )
        .outerjoin(Order, Order.public_id == GatewayCharge.reference)
        .outerjoin(Payment, Payment.public_id == GatewayCharge.reference)
        .where(GatewayCharge.status == SUCCEEDED)
        .order_by(GatewayCharge.created_at, GatewayCharge.id)
    ).all()
    found: list[Discrepancy] = []
    for row in rows:
        if row.payment_status == PAYMENT_SUCCEEDED and row.payment_charge_id == row.id:
            continue  # a payment of POST /api/payments (its reference) that records this charge
        took = _money(row.amount_cents, row.currency)
        if row.status is None:
            detail = _("the shop has no order %(order)s; it took %(took)s", order=row.reference, took=took)
        elif row.status not in WAS_PAID:
            detail = _("its order is %(status)s; it took %(took)s", status=status_label(row.status), took=took)
        elif row.charge_id != row.id:
            detail = _(
                "its order is paid by %(charge)s: this is one more charge; it took %(took)s",
                charge=row.charge_id or _("no charge"),
                took=took,
            )
        else:
            continue
        found.append(Discrepancy(CHARGE_WITHOUT_PAID_ORDER, row.reference, row.id, detail))
    return len(rows), found


def reconciliation_report() -> Report:
    paid, order_side = _paid_orders()
    charges, gateway_side = _succeeded_charges()
    return Report(paid, charges, order_side + gateway_side)
