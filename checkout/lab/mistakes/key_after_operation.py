"""key-after-operation: the key is written after the order and the charge.

THE MISTAKE: the key is remembered only once the work is done, with its
answer, like a cache. Until that last line nothing says this key is being
paid: a worker that dies after the charge (killed, out of memory, deployed
over) or a gateway whose answer is lost leaves the money taken and the key
unknown, and the retry pays again. (Two duplicates at once both pay too:
neither has written the key yet.)

THE FIX in the safe code: checkout/idempotency/engine.py (_claim) claims the
key first, in the transaction that creates the order, and
checkout/shop/placement.py (PlaceOrder.phases) commits the recovery point
order_created before the gateway is called: a retry resumes that order under
its own gateway key instead of placing another.
"""

from __future__ import annotations

from flask import Response

from checkout.lab.mistakes.plumbing import Attempt, claim_key, find_key, mismatch, pay, replay, same_request, send

TAKES_KEY = True


def handle(attempt: Attempt) -> Response:
    seen = find_key(attempt)
    if seen is not None:
        return replay(seen) if same_request(seen, attempt) else mismatch()
    answer = pay(attempt)  # the order and the charge, before anything knows this key
    # THE MISTAKE: a worker that dies before the next line (or a lost gateway answer, which never reaches it)
    # leaves the charge standing and the key unknown: the retry is a new payment.
    claim_key(
        attempt,
        fingerprint=attempt.fingerprint,
        response_status=answer.status,
        response_headers=answer.headers,
        response_body=answer.body,
    )
    return send(answer)
