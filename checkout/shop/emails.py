"""The shop's two emails, written into the outbox in the transaction that makes them true."""

from __future__ import annotations

from flask_babel import force_locale
from flask_babel import gettext as _

from checkout.mail.models import ORDER_CONFIRMATION, REFUND_RECEIPT
from checkout.mail.outbox import enqueue
from checkout.shop.money import format_money
from checkout.shop.orders import OrderView


def order_confirmation(order: OrderView) -> None:
    with force_locale(order.language):  # the shopper's, whichever request (or webhook) pays
        _order_confirmation(order)


def _order_confirmation(order: OrderView) -> None:
    lines = "\n".join(
        f"  {line.quantity} x {_(line.name)}  {format_money(line.total_cents, order.currency)}" for line in order.items
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
        _refund_receipt(refund_id, amount_cents, currency, order)


def _refund_receipt(refund_id: str, amount_cents: int, currency: str, order: OrderView) -> None:
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
