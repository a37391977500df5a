"""schemathesis hooks for scripts/fuzz_api.py: a fresh Idempotency-Key for every generated case.

A generated key would often repeat across cases, and a repeated key with another
body is a 422 by design; a fresh one lets each case reach the code behind the key.
A key the shop would refuse anyway (missing, malformed, several) is left as it
was generated: those cases test the refusal.

An order body that has the right shape gets products of the seeded catalog and
a test card for most cases: random SKUs and card numbers would be refused
(422) before any order is placed, and nothing behind the validation would be
reached. A payment body gets an orderId of its own and a test card the same way.
"""

from __future__ import annotations

import uuid
from typing import Any

import schemathesis

from checkout.idempotency import InvalidKey, parse_key

SKUS = ("MUG-01", "TEE-01", "STK-01", "LAST-01")
# Not the fault cards: their 503 is the contract (retry with the same key), and the suite tests it.
CARDS = ("4242 4242 4242 4242", "4000 0000 0000 0002")


@schemathesis.hook
def map_headers(context: Any, headers: dict[str, str] | None) -> dict[str, str] | None:
    if headers is not None and "Idempotency-Key" in headers:
        try:
            parse_key(headers["Idempotency-Key"])
        except InvalidKey:
            return headers
        headers["Idempotency-Key"] = str(uuid.uuid4())
    return headers


@schemathesis.hook
def map_body(context: Any, body: Any) -> Any:
    if isinstance(body, dict) and isinstance(body.get("orderId"), str):
        return _payment_body(body)
    if not isinstance(body, dict) or not isinstance(body.get("items"), list):
        return body
    seed = len(str(body))
    if seed % 4 == 0:  # a quarter as generated: what the shop refuses must stay refused
        return body
    for index, item in enumerate(body["items"]):
        if isinstance(item, dict) and "sku" in item:
            item["sku"] = SKUS[(seed + index) % len(SKUS)]
    if "card_number" in body:
        body["card_number"] = CARDS[seed % len(CARDS)]
    return body


def _payment_body(body: dict[str, Any]) -> dict[str, Any]:
    """A payment body: for most cases an orderId of its own and a test card, so the case reaches the
    gateway (a repeated generated orderId would be a 409 ``order-already-paid``, a random card a 422)."""
    seed = len(str(body))
    if seed % 4 == 0:  # a quarter as generated: what the shop refuses must stay refused
        return body
    body["orderId"] = f"fuzz-{uuid.uuid4().hex[:16]}"
    if "card_number" in body:
        body["card_number"] = CARDS[seed % len(CARDS)]
    return body
