"""unscoped-key: keys unique on the key alone, not per customer.

The shop's payment with one part swapped; its page's words: content/<language>/mistakes/unscoped-key.md
"""

from __future__ import annotations

from checkout.idempotency import Scope
from checkout.idempotency.edge import per_customer
from checkout.lab.mistakes.twin import twin


def the_key_alone(customer: str, endpoint: str, key: str) -> Scope:
    # THE MISTAKE: the customer is left out, so a key string belongs to whoever sent it first.
    return Scope("*", endpoint, key)


PIPELINE = twin("unscoped-key", scope_of=the_key_alone)
SWAPPED = "scope_of"
REPLACES = ((per_customer, the_key_alone),)
