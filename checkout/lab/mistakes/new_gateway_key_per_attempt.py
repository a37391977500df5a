"""new-gateway-key-per-attempt: the gateway gets a fresh key on every retry.

THE MISTAKE: the shop claims its own key correctly, but every attempt to
charge is a new payment at the gateway, under a new gateway key. When the
gateway's answer is lost (a timeout: card 4000 0000 0000 0259) the charge may
well exist; the retry asks under a key the gateway has never seen, so it
charges again. (Each attempt here also writes its own order row: this shop's
mock gateway refuses a second succeeded charge for one order reference, a
last line of defence a real provider may not have.)

THE FIX in the safe code: checkout/shop/placement.py (gateway_key_for,
PlaceOrder.charge): the gateway key is derived from the order, made once, and
the same on every retry, resumed call and reconcile run; the gateway
(checkout/gateway/client.py, Gateway.charge) returns the first charge made
under it.
"""

from __future__ import annotations

import uuid

from flask import Response

from checkout.idempotency import StoredResponse
from checkout.lab.mistakes.plumbing import (
    Attempt,
    charge,
    claim_key,
    create_order,
    in_progress,
    mismatch,
    replay,
    same_request,
    send,
)

TAKES_KEY = True


def handle(attempt: Attempt) -> Response:
    row, mine = claim_key(attempt, fingerprint=attempt.fingerprint)
    if not mine:
        if not same_request(row, attempt):
            return mismatch()
        if row.response is not None:
            return replay(row)
        if row.order_id is None:
            return in_progress(attempt)
    # The first attempt, or a retry of one whose gateway call failed or lost its answer.
    # THE MISTAKE: a new payment under a new gateway key, as if the last call had surely charged nothing.
    order = create_order(attempt, row, gateway_key=f"charge-{uuid.uuid4()}")
    if isinstance(order, StoredResponse):
        return send(order)
    return send(charge(attempt, order, row))
