"""The shop's two emails, written into the outbox in the transaction that makes them true."""

from __future__ import annotations

from checkout.mail.models import ORDER_CONFIRMATION, REFUND_RECEIPT
from checkout.mail.outbox import enqueue
from checkout.shop.money import format_money
from checkout.shop.orders import OrderView


def order_confirmation(order: OrderView) -> None:
    lines = "\n".join(
        f"  {line.quantity} x {line.name}  {format_money(line.total_cents, order.currency)}" for line in order.items
    )
    enqueue(
        ORDER_CONFIRMATION,
        order.public_id,
        order.email,
        f"Your order {order.public_id} is paid",
        f"Thank you for your order {order.public_id}.\n\n{lines}\n\n"
        f"Total charged, once: {format_money(order.total_cents, order.currency)} (charge {order.charge_id}).\n",
    )


def refund_receipt(refund_id: str, amount_cents: int, currency: str, order: OrderView) -> None:
    enqueue(
        REFUND_RECEIPT,
        refund_id,
        order.email,
        f"Refund {refund_id} for order {order.public_id}",
        f"We refunded {format_money(amount_cents, currency)} of your order {order.public_id} (refund {refund_id}).\n",
    )
