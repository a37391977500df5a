"""Stock: taken by the order's own transaction, given back once if the order ends unpaid.

Taking is a conditional UPDATE per line (``stock >= quantity``): two shoppers
racing for the last item cannot both get it, and a CHECK keeps stock from
ever going below zero. Giving back happens in the transaction that ends the
order unpaid, and only there, guarded by the order's own conditional status
change: so exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from checkout.database import table_of
from checkout.extensions import db
from checkout.shop.models import Line, OrderItem, Product

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


def take(lines: Sequence[Line]) -> list[str]:
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
        give_back(taken)  # all or nothing, in this same transaction
    return short


def give_back(lines: Sequence[Line]) -> None:
    if lines:
        ordered = sorted(lines, key=lambda line: line.sku)  # the lock order of take()
        db.session.execute(_GIVE_BACK, [{"_sku": line.sku, "_quantity": line.quantity} for line in ordered])


def give_back_order(order_id: int) -> None:
    """The order ended unpaid: its quantities go back on the shelf (the caller changed its status first)."""
    rows = db.session.execute(sa.select(OrderItem.sku, OrderItem.quantity).where(OrderItem.order_id == order_id)).all()
    give_back([Line(sku, "", quantity, 0) for sku, quantity in rows])
