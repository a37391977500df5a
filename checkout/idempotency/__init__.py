"""The idempotency engine: keys, fingerprints, atomic claims, leases, replays.

It knows nothing of orders or payments; the shop hands it an action to run
at most once per (customer, endpoint, key).

    keys.py         what a key may look like
    fingerprint.py  the HMAC of a request, stored with its key
    models.py       the record (unique per customer, endpoint, key) and the audit events
    types.py        scopes, settings, stored answers, outcomes
    engine.py       claim, take over, execute, purge: the flow
    operation.py    owner-checked phases and recovery points
    audit.py        the trail of every step
"""

from checkout.idempotency.audit import had_duplicates, record_event
from checkout.idempotency.engine import abandoned, claim, execute, peek, purge, take_over
from checkout.idempotency.fingerprint import fingerprint
from checkout.idempotency.keys import MalformedKey, MissingKey, parse_key
from checkout.idempotency.models import (
    COMPLETED,
    FINISHED,
    IN_PROGRESS,
    STARTED,
    IdempotencyEvent,
    IdempotencyRecord,
)
from checkout.idempotency.operation import Operation
from checkout.idempotency.types import (
    Done,
    InProgress,
    LeaseLost,
    Mismatch,
    Outcome,
    RetryLater,
    Scope,
    Settings,
    StoredResponse,
    Unfinished,
)

__all__ = [
    "COMPLETED",
    "FINISHED",
    "IN_PROGRESS",
    "STARTED",
    "Done",
    "IdempotencyEvent",
    "IdempotencyRecord",
    "InProgress",
    "LeaseLost",
    "MalformedKey",
    "Mismatch",
    "MissingKey",
    "Operation",
    "Outcome",
    "RetryLater",
    "Scope",
    "Settings",
    "StoredResponse",
    "Unfinished",
    "abandoned",
    "claim",
    "execute",
    "fingerprint",
    "had_duplicates",
    "parse_key",
    "peek",
    "purge",
    "record_event",
    "take_over",
]
