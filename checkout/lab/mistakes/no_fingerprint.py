"""no-fingerprint: a changed body under a used key is not detected.

THE MISTAKE: the store keeps the key and the answer, but not what was asked.
A client that reuses a key for another request (a bug, a form edited and sent
again, a key hard-coded in a script) is answered with the first request's
stored answer as if it were this one's: "201 Created" for an order of five
mugs that was never placed, holding the first order of two.

THE FIX in the safe code: checkout/shop/placement.py (keyed_fingerprint) stores
an HMAC of the normalized body with the key (checkout/idempotency/fingerprint.py,
fingerprint), and checkout/idempotency/engine.py (_answer_existing) answers 422
idempotency-key-reused when it differs, leaving the stored answer untouched.
"""

from __future__ import annotations

from typing import Any

from checkout.lab.mistakes.twin import twin
from checkout.shop.placement import keyed_fingerprint


def nothing_of_the_request(endpoint: str, body: dict[str, Any]) -> str:
    # THE MISTAKE: nothing about the request is kept with the key, so another body under it looks the same.
    return ""


PIPELINE = twin("no-fingerprint", fingerprint_of=nothing_of_the_request)
SWAPPED = "fingerprint_of"
REPLACES = ((keyed_fingerprint, nothing_of_the_request),)
