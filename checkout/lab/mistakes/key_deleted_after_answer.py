"""key-deleted-after-answer: the record is deleted as soon as the answer is sent.

THE MISTAKE: the key is used as a lock, not as a record. It is held while the
payment runs (a duplicate meanwhile gets 409), then deleted "to keep the table
small". But the retry that matters most comes later: the client whose answer
was lost on the way back retries after its timeout, finds no key, and pays
again.

THE FIX in the safe code: checkout/idempotency/engine.py (_answer_existing)
replays a completed record's answer for CHECKOUT_KEY_LIFETIME_SECONDS (24 h;
checkout/idempotency/engine.py (purge) removes it only after that), and even
then checkout/shop/models.py (Order, unique on customer_id and
idempotency_key) finds the order a late retry already placed.
"""

from __future__ import annotations

from flask import Response

from checkout.lab.mistakes.plumbing import Attempt, claim_key, delete, in_progress, pay, send

TAKES_KEY = True


def handle(attempt: Attempt) -> Response:
    lock, mine = claim_key(attempt)
    if not mine:
        return in_progress(attempt)  # another request with this key is running right now
    try:
        return send(pay(attempt))
    finally:
        # THE MISTAKE: the answer is on its way, so the key goes. Any retry from now on is a new payment.
        delete(lock)
