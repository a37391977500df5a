"""new-gateway-key-per-attempt: the gateway gets a fresh key on every retry.

THE MISTAKE: the shop claims its own key correctly, but every attempt to
charge is a new payment at the gateway, under a new gateway key. When the
gateway's answer is lost (a timeout: card 4000 0000 0000 0259) the charge may
well exist; the retry asks under a key the gateway has never seen, so it
charges again. (Each attempt here also sends its own reference, the order's
id and the attempt's: this shop's mock gateway refuses a second succeeded
charge for one reference, a last line of defence a real provider may not
have.)

THE FIX in the safe code: checkout/shop/placement.py (from_the_order,
PlaceOrder.charge): the gateway key is derived from the order, made once, and
the same on every retry, resumed call and reconcile run; the gateway
(checkout/gateway/client.py, Gateway.charge) returns the first charge made
under it.
"""

from __future__ import annotations

import uuid

from checkout.lab.mistakes.twin import twin
from checkout.shop.orders import OrderView
from checkout.shop.placement import GatewayCall, from_the_order


def a_new_payment_per_attempt(order: OrderView) -> GatewayCall:
    # THE MISTAKE: a new key (and a new attempt's reference) every time, as if the last call surely charged nothing.
    attempt = uuid.uuid4().hex[:12]
    return GatewayCall(f"charge-{attempt}", f"{order.public_id}/{attempt}")


PIPELINE = twin("new-gateway-key-per-attempt", gateway_call_of=a_new_payment_per_attempt)
SWAPPED = "gateway_call_of"
REPLACES = ((from_the_order, a_new_payment_per_attempt),)
