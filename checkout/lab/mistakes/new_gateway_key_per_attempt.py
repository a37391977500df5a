"""new-gateway-key-per-attempt: the gateway gets a fresh key on every retry.

The shop's payment with one part swapped.
Its page's words: content/<language>/mistakes/new-gateway-key-per-attempt.md
"""

from __future__ import annotations

import uuid

from checkout.lab.mistakes.twin import twin
from checkout.shop.orders import OrderView
from checkout.shop.payment import GatewayCall, from_the_order


def a_new_payment_per_attempt(order: OrderView) -> GatewayCall:
    # THE MISTAKE: a new key (and a new attempt's reference) every time, as if the last call surely charged nothing.
    attempt = uuid.uuid4().hex[:12]
    return GatewayCall(f"charge-{attempt}", f"{order.public_id}/{attempt}")


PIPELINE = twin("new-gateway-key-per-attempt", gateway_call_of=a_new_payment_per_attempt)
SWAPPED = "gateway_call_of"
REPLACES = ((from_the_order, a_new_payment_per_attempt),)
