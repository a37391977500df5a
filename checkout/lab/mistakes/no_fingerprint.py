"""no-fingerprint: a changed body under a used key is not detected.

THE MISTAKE: the store keeps the key and the answer, but not what was asked.
A client that reuses a key for another request (a bug, a form edited and sent
again, a key hard-coded in a script) is answered with the first request's
stored answer as if it were this one's: "201 Created" for an order of five
mugs that was never placed, holding the first order of two.

THE FIX in the safe code: checkout/shop/api.py (api_fingerprint) stores an HMAC
of the normalized body with the key (checkout/idempotency/fingerprint.py,
fingerprint), and checkout/idempotency/engine.py (_answer_existing) answers 422
idempotency-key-reused when it differs, leaving the stored answer untouched.
"""

from __future__ import annotations

from flask import Response

from checkout.lab.mistakes.plumbing import Attempt, answer_seen, claim_key, pay, send

TAKES_KEY = True


def handle(attempt: Attempt) -> Response:
    # THE MISTAKE: nothing about the request is stored with the key (no fingerprint) ...
    row, mine = claim_key(attempt)
    if not mine:
        # ... so nothing asks whether this is the same request: the key's first answer, whatever was sent.
        return answer_seen(row, attempt)
    return send(pay(attempt, row))
