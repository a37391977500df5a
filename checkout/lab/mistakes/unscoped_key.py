"""unscoped-key: keys unique on the key alone, not per customer.

THE MISTAKE: the store asks "has anyone sent this key?" instead of "has this
customer sent this key?". Clients choose their keys, and two customers' apps
that count from 1, or copy a key from the same tutorial, send the same string.
The second customer is then answered with the first one's stored response:
their order, their email, their card's last four digits; and the second
customer's own purchase is never placed. (With a fingerprint check it would be
a 422 instead, for a key they never used: still wrong.)

THE FIX in the safe code: checkout/idempotency/types.py (Scope: customer,
endpoint, key) and checkout/idempotency/models.py (IdempotencyRecord, unique
on customer, endpoint and key): a key means something only for one customer
on one endpoint.
"""

from __future__ import annotations

from flask import Response

from checkout.lab.mistakes.models import UnscopedKey
from checkout.lab.mistakes.plumbing import Attempt, answer_seen, claim, pay, send

TAKES_KEY = True


def handle(attempt: Attempt) -> Response:
    # THE MISTAKE: the table is unique on the key alone (see UnscopedKey), so the claim is too.
    row, mine = claim(
        UnscopedKey, match=("key",), key=attempt.key, customer=attempt.customer, fingerprint=attempt.fingerprint
    )
    if not mine:
        # Found by the key alone: whoever sent it first, this customer gets their answer.
        return answer_seen(row, attempt)
    return send(pay(attempt, row))
