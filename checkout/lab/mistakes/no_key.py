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

from checkout.idempotency.sql_store import SqlStore
from checkout.idempotency.store import NoStore
from checkout.lab.mistakes.twin import twin

# THE MISTAKE: no store at all, so no key is read and none is kept: every request is a new payment.
PIPELINE = twin("no-key", store=None)
SWAPPED = "store"
REPLACES = ((SqlStore.find, NoStore.find), (SqlStore.claim, NoStore.claim))
