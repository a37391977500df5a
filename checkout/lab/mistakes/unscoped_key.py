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

from checkout.idempotency import Scope
from checkout.lab.mistakes.twin import twin
from checkout.shop.placement import per_customer


def the_key_alone(customer: str, endpoint: str, key: str) -> Scope:
    # THE MISTAKE: the customer is left out, so a key string belongs to whoever sent it first.
    return Scope("*", endpoint, key)


PIPELINE = twin("unscoped-key", scope_of=the_key_alone)
SWAPPED = "scope_of"
REPLACES = ((per_customer, the_key_alone),)
