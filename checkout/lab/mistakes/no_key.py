"""no-key: no key at all (the unsafe checkout, as an API).

The shop's payment with one part swapped; its page's words: content/<language>/mistakes/no-key.md
"""

from __future__ import annotations

from checkout.idempotency import NO_STORE
from checkout.idempotency.store import NoStore, SqlStore
from checkout.lab.mistakes.twin import twin

# THE MISTAKE: no store at all, so no key is read and none is kept: every request is a new payment.
PIPELINE = twin("no-key", store=NO_STORE)
SWAPPED = "store"
REPLACES = ((SqlStore.find, NoStore.find), (SqlStore.claim, NoStore.claim))
