"""check-then-insert: look the key up, then insert it, with no unique constraint.

THE MISTAKE: two steps where one is needed. A SELECT asks "is this key new?",
then an INSERT records it. Two requests with one key that arrive together both
read "new" before either has inserted, and nothing in the table refuses the
second row (lab_check_then_insert_keys has no unique constraint): both pay.
The code looks right, and passes every test that sends one request at a time.

THE FIX in the safe code: checkout/idempotency/engine.py (_claim): one
INSERT ... ON CONFLICT DO NOTHING against the unique (customer, endpoint, key)
of checkout/idempotency/models.py (IdempotencyRecord) decides the race; the
read before it is only a shortcut for retries that come later.
"""

from __future__ import annotations

from flask import Response

from checkout.lab.mistakes.models import CheckThenInsertKey
from checkout.lab.mistakes.plumbing import (
    Attempt,
    KeyRow,
    answer_seen,
    find,
    insert,
    mismatch,
    pay,
    same_request,
    send,
)

TAKES_KEY = True


def look(attempt: Attempt) -> KeyRow | None:
    """Step 1: has this customer sent this key before? (The test holds racing requests here, once they have read.)"""
    return find(CheckThenInsertKey, customer=attempt.customer, key=attempt.key)


def handle(attempt: Attempt) -> Response:
    seen = look(attempt)
    if seen is not None:
        return answer_seen(seen, attempt) if same_request(seen, attempt) else mismatch()
    # THE MISTAKE: another request with this key may be between its look and its insert right now: it read
    # "new" too. Step 2 inserts anyway, and no unique constraint stops the second row.
    mine = insert(CheckThenInsertKey, customer=attempt.customer, key=attempt.key, fingerprint=attempt.fingerprint)
    return send(pay(attempt, mine))
