"""The damage table: the money, per purchase, exactly. The lab shows it; the mass test prints it.

A purchase is the orders that carry one client purchase reference (an order without one is a purchase of its own):
nothing here guesses, the reference is the client's own.
Design: docs/design.md#checkoutlabdamagepy-the-damage-table
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from checkout.extensions import db
from checkout.gateway import SUCCEEDED, GatewayCharge
from checkout.lab.tables import LabOrder, charged_for, path_of_order
from checkout.shop.models import DECLINED, FAILED, Customer, Order

# The checkout paths that keep every defence (the shop's own, and the lab's safe variants of it: records
# in Redis, a gateway without keys looked up by reference). Every other path is a wrong twin, on purpose.
PROTECTED_PATHS = frozenset({"safe", "store:redis", "legacy-gateway"})


@dataclass(frozen=True)
class Purchase:
    ref: str
    path: str
    customer: str
    amount_cents: int
    currency: str
    orders: int
    charges: int
    charged_cents: int
    all_unpaid: bool  # every order of it ended unpaid: declined, or failed with nothing charged (both final)
    last_activity: datetime

    @property
    def ordered_cents(self) -> int:
        return 0 if self.all_unpaid else self.amount_cents

    @property
    def charged_more_than_once_cents(self) -> int:
        return max(0, self.charged_cents - self.amount_cents)

    @property
    def never_charged_cents(self) -> int:
        return self.ordered_cents if self.charges == 0 else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "purchase": self.ref,
            "path": self.path,
            "customer": self.customer,
            "orders": self.orders,
            "charges": self.charges,
            "currency": self.currency,
            "ordered_cents": self.ordered_cents,
            "charged_cents": self.charged_cents,
            "charged_more_than_once_cents": self.charged_more_than_once_cents,
            "never_charged_cents": self.never_charged_cents,
            "last_activity": self.last_activity.isoformat().replace("+00:00", "Z"),
        }


@dataclass
class Totals:
    purchases: int = 0
    ordered_cents: int = 0
    charged_cents: int = 0
    charged_more_than_once_cents: int = 0
    never_charged_cents: int = 0
    paths: set[str] = field(default_factory=set)

    def add(self, purchase: Purchase) -> None:
        self.purchases += 1
        self.ordered_cents += purchase.ordered_cents
        self.charged_cents += purchase.charged_cents
        self.charged_more_than_once_cents += purchase.charged_more_than_once_cents
        self.never_charged_cents += purchase.never_charged_cents
        self.paths.add(purchase.path)

    @property
    def exact(self) -> bool:
        return self.charged_more_than_once_cents == 0 and self.never_charged_cents == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "purchases": self.purchases,
            "ordered_cents": self.ordered_cents,
            "charged_cents": self.charged_cents,
            "charged_more_than_once_cents": self.charged_more_than_once_cents,
            "never_charged_cents": self.never_charged_cents,
            "exact": self.exact,
        }


def purchases(*, prefix: str | None = None, customer: str | None = None) -> list[Purchase]:
    """Every purchase (or those whose reference starts with ``prefix``, or one customer's), most recent activity
    first."""
    charged = (
        sa.select(
            GatewayCharge.reference,
            sa.func.count().label("charges"),
            sa.func.sum(GatewayCharge.amount_cents).label("amount"),
        )
        .where(GatewayCharge.status == SUCCEEDED)
        .group_by(GatewayCharge.reference)
        .subquery()
    )
    ref = sa.func.coalesce(LabOrder.purchase_ref, Order.public_id)
    path = path_of_order().label("path")
    query = (
        sa.select(
            ref.label("ref"),
            path,
            sa.func.coalesce(Customer.name, Customer.public_id).label("customer"),
            sa.func.max(Order.total_cents).label("amount"),
            sa.func.min(Order.currency).label("currency"),
            sa.func.count(Order.id).label("orders"),
            sa.func.sum(sa.func.coalesce(charged.c.charges, 0)).label("charges"),
            sa.func.sum(sa.func.coalesce(charged.c.amount, 0)).label("charged"),
            sa.func.sum(sa.case((Order.status.in_((DECLINED, FAILED)), 1), else_=0)).label("unpaid"),
            sa.func.max(Order.updated_at).label("last_activity"),
        )
        .join(Customer, Customer.id == Order.customer_id)
        .outerjoin(LabOrder, LabOrder.order_id == Order.id)
        # A charge's reference is its order's id (or, for a twin that charges per attempt, the id and "/<attempt>").
        .outerjoin(charged, charged_for(charged.c.reference, Order.public_id))
        .group_by(ref, path_of_order(), Customer.name, Customer.public_id)
    )
    if prefix:
        query = query.where(LabOrder.purchase_ref.startswith(prefix, autoescape=True))
    if customer is not None:
        query = query.where(Customer.public_id == customer)
    found = [
        Purchase(
            ref=row.ref,
            path=row.path,
            customer=row.customer,
            amount_cents=int(row.amount),
            currency=row.currency,
            orders=int(row.orders),
            charges=int(row.charges),
            charged_cents=int(row.charged),
            all_unpaid=int(row.unpaid) == int(row.orders),
            last_activity=_aware(row.last_activity),
        )
        for row in db.session.execute(query)
    ]
    return sorted(found, key=lambda p: p.last_activity, reverse=True)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def totals(found: list[Purchase]) -> tuple[dict[str, Totals], Totals]:
    """Totals per checkout path and over everything: safe first, then unsafe, then the lab's mistakes."""
    by_path: dict[str, Totals] = {}
    overall = Totals()
    for purchase in found:
        by_path.setdefault(purchase.path, Totals()).add(purchase)
        overall.add(purchase)
    return dict(sorted(by_path.items(), key=lambda item: (item[0] != "safe", item[0] != "unsafe", item[0]))), overall


def by_path() -> dict[str, Totals]:
    """Each checkout path's totals over every purchase (a page's own row of the damage table)."""
    return totals(purchases())[0]


def by_customer() -> dict[str, Totals]:
    """Each customer's totals over every purchase (the room of a workshop: one row per seat)."""
    found: dict[str, Totals] = {}
    for purchase in purchases():
        found.setdefault(purchase.customer, Totals()).add(purchase)
    return found
