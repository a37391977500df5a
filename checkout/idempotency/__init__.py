"""The idempotency engine: keys, fingerprints, atomic claims, leases, phases, replays.

It knows nothing of orders or payments; the shop hands it the phases of an
operation to run at most once per (customer, endpoint, key).

    keys.py         what a key may look like
    fingerprint.py  the HMAC of a request, stored with its key
    models.py       the record (unique per customer, endpoint, key) and the audit events
    types.py        scopes, settings, steps, outcomes, the read model of a record
    engine.py       look, claim, take over, wait, run the phases, purge
    operation.py    owner-checked transactions and recovery points
    audit.py        the trail of every step
"""

from checkout.idempotency.audit import note
from checkout.idempotency.engine import abandoned, begin, peek, purge, run, take_over
from checkout.idempotency.fingerprint import fingerprint
from checkout.idempotency.keys import InvalidKey, MalformedKey, MissingKey, SeveralKeys, parse_key
from checkout.idempotency.models import IdempotencyEvent, IdempotencyRecord
from checkout.idempotency.operation import Operation
from checkout.idempotency.types import (
    COMPLETED,
    FINISHED,
    IN_PROGRESS,
    STARTED,
    Complete,
    Done,
    Event,
    InProgress,
    LeaseLost,
    Mismatch,
    MoveTo,
    Outcome,
    Phase,
    RecordView,
    Refuse,
    Refused,
    RetryLater,
    Scope,
    Settings,
    Step,
    StoredResponse,
    Unfinished,
)

__all__ = [
    "COMPLETED",
    "FINISHED",
    "IN_PROGRESS",
    "STARTED",
    "Complete",
    "Done",
    "Event",
    "IdempotencyEvent",
    "IdempotencyRecord",
    "InProgress",
    "InvalidKey",
    "LeaseLost",
    "MalformedKey",
    "Mismatch",
    "MissingKey",
    "MoveTo",
    "Operation",
    "Outcome",
    "Phase",
    "RecordView",
    "Refuse",
    "Refused",
    "RetryLater",
    "Scope",
    "Settings",
    "SeveralKeys",
    "Step",
    "StoredResponse",
    "Unfinished",
    "abandoned",
    "begin",
    "fingerprint",
    "note",
    "parse_key",
    "peek",
    "purge",
    "run",
    "take_over",
]
