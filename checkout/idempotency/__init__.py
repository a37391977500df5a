"""The idempotency engine: keys, fingerprints, atomic claims, leases, replays.

It knows nothing of orders or payments; the shop hands it an action to run
at most once per (customer, endpoint, key).
"""
from checkout.idempotency.engine import (
    Done,
    InProgress,
    LeaseLost,
    Mismatch,
    Operation,
    Outcome,
    RetryLater,
    Scope,
    Settings,
    StoredResponse,
    Unfinished,
    abandoned,
    claim,
    execute,
    peek,
    purge,
    record_event,
    take_over,
)
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

__all__ = [
    "COMPLETED", "FINISHED", "IN_PROGRESS", "STARTED",
    "Done", "IdempotencyEvent", "IdempotencyRecord", "InProgress", "LeaseLost",
    "MalformedKey", "Mismatch", "MissingKey", "Operation", "Outcome", "RetryLater",
    "Scope", "Settings", "StoredResponse", "Unfinished",
    "abandoned", "claim", "execute", "fingerprint", "parse_key", "peek", "purge", "record_event", "take_over",
]
