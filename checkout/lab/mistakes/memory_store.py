"""memory-store: keys kept in one worker's memory.

THE MISTAKE: the store is a dict in this Python process. Here it is even
atomic (a lock) and fast, but a shop served by several workers (make serve:
gunicorn, four of them) or several servers has one store per process: a retry
that lands on another worker finds nothing and pays again. A restart or a
deploy forgets every key too. (Each answer's Lab-Worker header says which
process answered.)

THE FIX in the safe code: checkout/idempotency/models.py (IdempotencyRecord):
the records live in the database every worker and server shares, claimed by
checkout/idempotency/engine.py (_claim).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from flask import Response

from checkout.idempotency import StoredResponse
from checkout.lab.mistakes.plumbing import Attempt, answer_seen, mismatch, pay, same_request, send

TAKES_KEY = True


@dataclass
class Remembered:
    fingerprint: str
    order_id: str | None = None
    response: StoredResponse | None = None

    def keep_order(self, order_id: str) -> None:
        self.order_id = order_id

    def keep_response(self, response: StoredResponse) -> None:
        self.response = response


# THE MISTAKE: one dict per process. Every other worker has its own, and it has never seen this key.
_remembered: dict[tuple[str, str], Remembered] = {}
_lock = threading.Lock()


def handle(attempt: Attempt) -> Response:
    scope = (attempt.customer, attempt.key)
    with _lock:  # atomic: but only among the threads of this one process
        seen = _remembered.get(scope)
        if seen is None:
            _remembered[scope] = mine = Remembered(attempt.fingerprint)
    if seen is not None:
        return answer_seen(seen, attempt) if same_request(seen, attempt) else mismatch()
    return send(pay(attempt, mine))
