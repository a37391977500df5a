"""The idempotency engine: run an operation at most once per (customer, endpoint, key).

It knows nothing of orders or payments; a caller hands it the phases of an
operation and a record store, and imports what it needs beyond these names
from the modules themselves:

    keys.py         what a key may look like, and the HMAC of a request stored with it
    types.py        scopes, settings, steps, outcomes, the read model of a record
    store.py        the record store port (and NoStore: no idempotency at all)
    sql_store.py    the shop's store: records in the order's own database
    engine.py       look, claim, wait, take over, run the phases; the Operation a phase is handed
    models.py       the record and its audit events; audit.py writes the trail
"""

from checkout.idempotency.engine import Operation, peek, run, take_over
from checkout.idempotency.keys import fingerprint, parse_key
from checkout.idempotency.store import RecordStore
from checkout.idempotency.types import Complete, MoveTo, Phase, Refuse, RetryLater, Scope, Settings, StoredResponse

__all__ = [
    "Complete",
    "MoveTo",
    "Operation",
    "Phase",
    "RecordStore",
    "Refuse",
    "RetryLater",
    "Scope",
    "Settings",
    "StoredResponse",
    "fingerprint",
    "parse_key",
    "peek",
    "run",
    "take_over",
]
