"""Ending an order, with everything that goes with it, in the current unit of work.

The worker that paid, reconcile, and the gateway's webhook can all learn an
order's outcome. Whoever comes first moves it from pending (a conditional
UPDATE) and does the rest in the same transaction: a paid order empties the
cart version it paid for and writes its confirmation email; an order that
ends unpaid gives its stock back and retires its cart version (the next try
gets a new key). The others find it no longer pending and change nothing.
"""

from __future__ import annotations

from checkout.shop import carts, emails, orders, stock
from checkout.shop.models import PAID
from checkout.shop.orders import OrderView


def end_order(order: OrderView, status: str, charge_id: str | None) -> OrderView | None:
    """Move a pending order to ``status``; None if it was not pending any more (nothing changed)."""
    ended = orders.end_pending(order, status, charge_id)
    if ended is None:
        return None
    cart_id, version = ended.cart_id, ended.cart_version  # None for an API order: no cart
    if ended.status == PAID:
        if cart_id is not None and version is not None and not carts.close_paid_version(cart_id, version):
            orders.mark_cart_moved_on(ended)
        emails.order_confirmation(ended)
    else:
        stock.give_back_order(ended.id)
        if cart_id is not None and version is not None:
            carts.retire_version(cart_id, version)
    return ended
