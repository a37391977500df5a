"""no-key: no key at all (the unsafe checkout, as an API).

THE MISTAKE: nothing tells a retry from a new payment. The Idempotency-Key
header is not even read, so every request that arrives is a new order and a
new charge: a double-click, a retry after a timeout, a proxy's resend, each
pays again.

THE FIX in the safe code: checkout/shop/api.py (create_order), which refuses a
request without a key (400) and hands the key to the engine, which claims it
once: checkout/idempotency/engine.py (_claim).

Its browser twin is the lab's unsafe checkout (/lab/unsafe-checkout).
"""

from __future__ import annotations

from flask import Response

from checkout.lab.mistakes.plumbing import Attempt, pay, send

TAKES_KEY = False  # the header is ignored: a missing or malformed key is no error here


def handle(attempt: Attempt) -> Response:
    # THE MISTAKE: no key looked up, none stored. This request is a new payment, whatever came before it.
    return send(pay(attempt))
