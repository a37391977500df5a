"""Orders as plain values: inserted, read, moved from pending to an outcome; their stock, their prices from
the catalog, their emails, and the signals that tell the lab (when it listens) what was placed.

The payment's phases work with ``OrderView`` values and Core statements, not ORM objects: a value copied out of a
transaction can cross the gateway call safely (nothing reloads behind our back), and the hot path skips the ORM's
unit of work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from blinker import NamedSignal, Namespace
from flask import current_app
from flask_babel import force_locale
from flask_babel import gettext as _

from checkout.database import insert_ignoring_conflicts, table_of, utcnow
from checkout.extensions import db
from checkout.i18n import format_money, shopper_language
from checkout.mail.outbox import ORDER_CONFIRMATION, REFUND_RECEIPT, enqueue
from checkout.shop.models import PENDING, Order, OrderItem, Product, Refund, offered_to

if TYPE_CHECKING:
    from checkout.shop.schemas import Errors, RequestedLine

orders = table_of(Order)
order_items = table_of(OrderItem)
refunds = table_of(Refund)

# Told inside the unit of work that made the row, for whoever keeps accounts beside the shop (the lab, which
# listens to its own app only): order_placed(app, pipeline=, order_id=), refund_placed(app, pipeline=,
# refund_id=), stocked(app, sku=, added=), each in the request that placed it. With the lab off nobody listens.
_signals = Namespace()
order_placed = _signals.signal("order-placed")
refund_placed = _signals.signal("refund-placed")
stocked = _signals.signal("stocked")


def tell(signal: NamedSignal, **facts: Any) -> None:
    """``signal`` for this app: the lab listens to its own app only."""
    signal.send(current_app._get_current_object(), **facts)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Line:
    """A line of what is being bought, priced: the one shape the cart, the API and the order share."""

    sku: str
    name: str
    quantity: int
    unit_price_cents: int

    @property
    def total_cents(self) -> int:
        return self.quantity * self.unit_price_cents


def total_of(lines: Iterable[Line]) -> int:
    return sum(line.total_cents for line in lines)


@dataclass(frozen=True)
class RefundView:
    id: int
    public_id: str
    order_public_id: str
    order_id: int
    charge_id: str | None  # the order's charge, which the refund gives money back from
    refund_key: str
    amount_cents: int
    currency: str
    reason: str
    status: str
    created_at: datetime
    idempotency_key: str | None = None  # the key that made it: refunds are unique on (order, key)


def refunds_where(where: sa.ColumnElement[bool]) -> list[RefundView]:
    rows = db.session.execute(
        sa.select(refunds, orders.c.public_id.label("order_public"), orders.c.charge_id.label("order_charge"))
        .join(orders, orders.c.id == refunds.c.order_id)
        .where(where)
        .order_by(refunds.c.id)
    ).all()
    return [
        RefundView(
            r.id,
            r.public_id,
            r.order_public,
            r.order_id,
            r.order_charge,
            r.refund_key,
            r.amount_cents,
            r.currency,
            r.reason,
            r.status,
            r.created_at,
            r.idempotency_key,
        )
        for r in rows
    ]


def refund_by_public_id(refund_public_id: str) -> RefundView | None:
    found = refunds_where(refunds.c.public_id == refund_public_id)
    return found[0] if found else None


@dataclass(frozen=True)
class OrderView:
    id: int
    public_id: str
    customer_id: int
    idempotency_key: str
    cart_id: int | None
    cart_version: int | None
    gateway_key: str
    status: str
    email: str
    card_last4: str
    total_cents: int
    currency: str
    charge_id: str | None
    created_at: datetime
    items: tuple[Line, ...]
    refunded_cents: int = 0
    language: str = "en"  # the shopper's, for the emails
    refunds: tuple[RefundView, ...] = ()


_COLUMNS = [
    orders.c.id,
    orders.c.public_id,
    orders.c.customer_id,
    orders.c.idempotency_key,
    orders.c.cart_id,
    orders.c.cart_version,
    orders.c.gateway_key,
    orders.c.status,
    orders.c.email,
    orders.c.card_last4,
    orders.c.total_cents,
    orders.c.currency,
    orders.c.charge_id,
    orders.c.created_at,
    orders.c.refunded_cents,
    orders.c.language,
]


# Built once, executed with parameters (the payment runs them on every request).
_INSERT_ITEMS = sa.insert(order_items)
_END_PENDING = (
    sa.update(orders).where(orders.c.id == sa.bindparam("_id"), orders.c.status == PENDING).returning(*_COLUMNS)
)
_ITEMS = (
    sa.select(order_items.c.sku, order_items.c.name, order_items.c.quantity, order_items.c.unit_price_cents)
    .where(order_items.c.order_id == sa.bindparam("_order_id"))
    .order_by(order_items.c.id)
)


def _view(row: sa.Row[Any], items: Sequence[Line], refunds_of: Sequence[RefundView] = ()) -> OrderView:
    return OrderView(
        **{column.name: row._mapping[column] for column in _COLUMNS}, items=tuple(items), refunds=tuple(refunds_of)
    )


def _items_of(order_id: int) -> list[Line]:
    return [Line(*row) for row in db.session.execute(_ITEMS, {"_order_id": order_id})]


def load(where: sa.ColumnElement[bool]) -> OrderView | None:
    row = db.session.execute(sa.select(*_COLUMNS).where(where)).first()
    if row is None:
        return None
    return _view(row, _items_of(row.id), refunds_where(refunds.c.order_id == row.id))


def by_public_id(public_id: str) -> OrderView | None:
    return load(orders.c.public_id == public_id)


def gateway_key_of(public_id: str) -> str | None:
    return db.session.scalar(sa.select(orders.c.gateway_key).where(orders.c.public_id == public_id))


def view_of(order: Order) -> OrderView:
    """The value of an ORM order a page has loaded (its JSON is built the same way)."""
    return OrderView(
        **{column.name: getattr(order, column.key) for column in _COLUMNS},
        items=tuple(Line(i.sku, i.name, i.quantity, i.unit_price_cents) for i in order.items),
        refunds=tuple(refunds_where(refunds.c.order_id == order.id)),
    )


def insert(values: dict[str, Any], lines: Sequence[Line]) -> OrderView | None:
    """Insert a pending order and its lines; None if one of the orders' unique constraints says it exists."""
    now = utcnow()
    row = db.session.execute(
        insert_ignoring_conflicts(orders, db.session, returning=_COLUMNS),
        {
            **values,
            "status": PENDING,
            "cart_moved_on": False,
            "refunded_cents": 0,
            "language": shopper_language(),
            "created_at": now,
            "updated_at": now,
        },
    ).first()
    if row is None:
        return None
    db.session.execute(
        _INSERT_ITEMS,
        [
            {
                "order_id": row.id,
                "sku": line.sku,
                "name": line.name,
                "quantity": line.quantity,
                "unit_price_cents": line.unit_price_cents,
            }
            for line in lines
        ],
    )
    return _view(row, lines)


def withdraw(order: OrderView) -> None:
    """Delete an order inserted in this same unit of work, before it was ever committed.

    The payment inserts its order before it takes stock, so that the orders' unique
    constraints answer a late retry first; an order its stock then refuses was never placed.
    """
    db.session.execute(sa.delete(order_items).where(order_items.c.order_id == order.id))
    db.session.execute(sa.delete(orders).where(orders.c.id == order.id))


def end_pending(order: OrderView, status: str, charge_id: str | None) -> OrderView | None:
    """Move a pending order to its outcome; None if it was no longer pending (someone else ended it first)."""
    row = db.session.execute(
        _END_PENDING, {"_id": order.id, "status": status, "charge_id": charge_id, "updated_at": utcnow()}
    ).first()
    return replace(order, status=row.status, charge_id=row.charge_id) if row is not None else None


def refundable_cents(order: OrderView) -> int:
    """What is left to refund, read now (the view may be older than the last refund)."""
    refunded = db.session.scalar(sa.select(orders.c.refunded_cents).where(orders.c.id == order.id))
    return order.total_cents - int(refunded or 0)


def mark_cart_moved_on(order: OrderView) -> None:
    """Paid after the shopper changed the cart: the checkout will say this earlier payment went through."""
    db.session.execute(sa.update(orders).where(orders.c.id == order.id).values(cart_moved_on=True))


# --- stock ------------------------------------------------------------------------------------
# Stock: taken by the order's own transaction, given back once if the order ends unpaid.
# Taking is a conditional UPDATE per line (``stock >= quantity``): two shoppers racing for the last item cannot both
# get it, and a CHECK keeps stock from ever going below zero. Giving back happens in the transaction that ends the
# order unpaid, and only there, guarded by the order's own conditional status change: so exactly once.

products = table_of(Product)

_TAKE = (
    sa.update(products)
    .where(products.c.sku == sa.bindparam("_sku"), products.c.stock >= sa.bindparam("_quantity"))
    .values(stock=products.c.stock - sa.bindparam("_quantity"))
    .returning(products.c.sku)
)
_GIVE_BACK = (
    sa.update(products)
    .where(products.c.sku == sa.bindparam("_sku"))
    .values(stock=products.c.stock + sa.bindparam("_quantity"))
)


def take_stock(lines: Sequence[Line]) -> list[str]:
    """Take the lines' quantities off the shelf; the SKUs short of stock (then nothing is taken)."""
    taken: list[Line] = []
    short: list[str] = []
    # Always in SKU order: two orders of the same products lock their rows in one order, never a deadlock.
    for line in sorted(lines, key=lambda line: line.sku):
        if db.session.execute(_TAKE, {"_sku": line.sku, "_quantity": line.quantity}).first() is None:
            short.append(line.sku)
        else:
            taken.append(line)
    if short:
        _give_back(taken)  # all or nothing, in this same transaction
    return short


def _give_back(lines: Sequence[Line]) -> None:
    if lines:
        ordered = sorted(lines, key=lambda line: line.sku)  # the lock order of take_stock()
        db.session.execute(_GIVE_BACK, [{"_sku": line.sku, "_quantity": line.quantity} for line in ordered])


def give_back_stock(order_id: int) -> None:
    """The order ended unpaid: its quantities go back on the shelf (the caller changed its status first)."""
    rows = db.session.execute(sa.select(OrderItem.sku, OrderItem.quantity).where(OrderItem.order_id == order_id)).all()
    _give_back([Line(sku, "", quantity, 0) for sku, quantity in rows])


# --- emails -----------------------------------------------------------------------------------
# The shop's two emails, written into the outbox in the transaction that makes them true.


def order_confirmation(order: OrderView) -> None:
    with force_locale(order.language):  # the shopper's, whichever request (or webhook) pays
        lines = "\n".join(
            f"  {line.quantity} × {_(line.name)}  {format_money(line.total_cents, order.currency)}"
            for line in order.items
        )
        enqueue(
            ORDER_CONFIRMATION,
            order.public_id,
            order.email,
            _("Your order %(order)s is paid", order=order.public_id),
            _("Thank you for your order %(order)s.", order=order.public_id)
            + f"\n\n{lines}\n\n"
            + _(
                "Total charged, once: %(total)s (charge %(charge)s).",
                total=format_money(order.total_cents, order.currency),
                charge=order.charge_id,
            )
            + "\n",
        )


def refund_receipt(refund_id: str, amount_cents: int, currency: str, order: OrderView) -> None:
    with force_locale(order.language):
        enqueue(
            REFUND_RECEIPT,
            refund_id,
            order.email,
            _("Refund %(refund)s for order %(order)s", refund=refund_id, order=order.public_id),
            _(
                "We refunded %(amount)s of your order %(order)s (refund %(refund)s).",
                amount=format_money(amount_cents, currency),
                order=order.public_id,
                refund=refund_id,
            )
            + "\n",
        )


# --- an order's lines, priced from the catalog ------------------------------------------------


@dataclass(frozen=True)
class PricedLines:
    lines: tuple[Line, ...]
    currency: str


_PRICES = sa.select(Product.sku, Product.name, Product.price_cents, Product.currency).where(
    Product.sku.in_(sa.bindparam("_skus", expanding=True))
)


def price(items: Sequence[RequestedLine], customer_id: int | None) -> tuple[PricedLines | None, Errors]:
    """The lines at today's prices, or the errors of the items the catalog does not offer the customer
    (``offered_to``: with no customer, the products reserved for nobody)."""
    if not items:
        return None, {}
    skus = {item.sku for item in items}
    offered = _PRICES.where(offered_to(customer_id))
    products = {row.sku: row for row in db.session.execute(offered, {"_skus": sorted(skus)})}
    errors: Errors = {}
    for item in items:
        if item.sku not in products:
            errors[f"items[{item.index}].sku"] = [f"unknown sku {item.sku!r}"]
    if len({product.currency for product in products.values()}) > 1:
        errors["items"] = ["all items must share one currency"]
    if errors:
        return None, errors
    lines = tuple(
        Line(item.sku, products[item.sku].name, item.quantity, products[item.sku].price_cents) for item in items
    )
    return PricedLines(lines, products[items[0].sku].currency), {}
