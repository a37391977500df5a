"""The reconciliation report: the shop's ledger against the gateway's, line by line.

A gateway without keys can leave the two ledgers disagreeing; it knows nothing of orders, so only the shop can
compare. ``flask --app checkout gateway reconcile-report`` prints it; the lab shows it at ``/lab/reconciliation``.
Design: docs/design.md#checkoutshopreconciliation_reportpy-the-two-ledgers-compared
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.orm import lazyload

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
        # The label first, then its count: a noun phrase after a number would need a plural form per language.
        counts = ", ".join(f"{_(kind)}: {len(self.of_kind(kind))}" for kind in KINDS if self.of_kind(kind))
        found = ngettext("%(num)d discrepancy", "%(num)d discrepancies", len(self.discrepancies))
        return f"{compared}: {found} ({counts})"


def _money(cents: int, currency: str) -> str:
    return format_money(cents, currency) if currency else _("%(cents)s (no currency)", cents=cents)


def _paid_orders() -> tuple[int, list[Discrepancy]]:
    """Each paid order against the charge it records."""
    rows = db.session.execute(
        sa.select(Order, GatewayCharge)
        .options(lazyload(Order.items))  # not read here: no batch of every paid order's lines
        .outerjoin(GatewayCharge, GatewayCharge.id == Order.charge_id)
        .where(Order.status.in_(WAS_PAID))
        .order_by(Order.created_at, Order.id)
    ).all()
    found = [wrong for order, charge in rows if (wrong := _against_its_charge(order, charge)) is not None]
    return len(rows), found


def _against_its_charge(order: Order, charge: GatewayCharge | None) -> Discrepancy | None:
    """What is wrong with a paid order's charge; None when nothing is."""

    def wrong(kind: str, detail: str) -> Discrepancy:
        return Discrepancy(kind, order.public_id, order.charge_id, detail)

    if order.charge_id is None:
        return wrong(PAID_WITHOUT_CHARGE, _("the order records no charge"))
    if charge is None:
        return wrong(PAID_WITHOUT_CHARGE, _("the gateway has no such charge"))
    if charge.status != SUCCEEDED:
        return wrong(PAID_WITHOUT_CHARGE, _("the charge is %(status)s", status=charge.status))
    if charge.reference != order.public_id:
        detail = _("the charge belongs to another reference (%(reference)s)", reference=charge.reference)
        return wrong(PAID_WITHOUT_CHARGE, detail)
    if (charge.amount_cents, charge.currency) != (order.total_cents, order.currency):
        ordered, took = _money(order.total_cents, order.currency), _money(charge.amount_cents, charge.currency)
        return wrong(
            AMOUNTS_DIFFER, _("the order is for %(ordered)s, the charge took %(took)s", ordered=ordered, took=took)
        )
    return None


def _succeeded_charges() -> tuple[int, list[Discrepancy]]:
    """Each succeeded charge against the order of its reference."""
    query = (
        sa.select(GatewayCharge, Order, Payment)
        .options(lazyload(Order.items))
        .outerjoin(Order, Order.public_id == GatewayCharge.reference)
        .outerjoin(Payment, Payment.public_id == GatewayCharge.reference)
        .where(GatewayCharge.status == SUCCEEDED)
        .order_by(GatewayCharge.created_at, GatewayCharge.id)
    )
    rows: Sequence[tuple[GatewayCharge, Order | None, Payment | None]] = db.session.execute(query).all()
    found: list[Discrepancy] = []
    for charge, order, payment in rows:
        if payment is not None and payment.status == PAYMENT_SUCCEEDED and payment.charge_id == charge.id:
            continue  # a payment of POST /api/payments (its reference) that records this charge
        if order is not None and order.status not in WAS_PAID and charge.refunded_cents >= charge.amount_cents:
            continue  # compensated: its order ended unpaid, and the money went back (checkout.shop.compensation)
        took = _money(charge.amount_cents, charge.currency)
        if order is None:
            detail = _("the shop has no order %(order)s; it took %(took)s", order=charge.reference, took=took)
        elif order.status not in WAS_PAID:
            detail = _("its order is %(status)s; it took %(took)s", status=status_label(order.status), took=took)
        elif order.charge_id != charge.id:
            detail = _(
                "its order is paid by %(charge)s: this is one more charge; it took %(took)s",
                charge=order.charge_id or _("no charge"),
                took=took,
            )
        else:
            continue
        found.append(Discrepancy(CHARGE_WITHOUT_PAID_ORDER, charge.reference, charge.id, detail))
    return len(rows), found


def reconciliation_report() -> Report:
    paid, order_side = _paid_orders()
    charges, gateway_side = _succeeded_charges()
    return Report(paid, charges, order_side + gateway_side)
