"""The engine's vocabulary: what a key belongs to, its settings, the stored answer, the steps a phase may end
with, and the read model of a record."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

IN_PROGRESS = "in_progress"
COMPLETED = "completed"

STARTED = "started"  # every operation's first recovery point (never committed: the claim and first phase are one)
FINISHED = "finished"


class Event(enum.StrEnum):
    """The steps the engine notes (signals.noted); an app notes its own beside them. Recovery points say where an
    operation is, these what happened."""

    RECEIVED = "received"
    CLAIMED = "claimed"
    REPLAYED = "replayed"
    CONFLICT = "conflict"
    MISMATCH = "mismatch"
    RESUMED = "resumed"
    RECONCILE_STARTED = "reconcile_started"
    RELEASED = "released"
    LEASE_LOST = "lease_lost"
    RECORD_LOST = "record_lost"  # a store outside the transaction lost the record after its phase committed
    DISCARDED = "discarded"
    COMPLETED = "completed"
    ACCEPTED = "accepted"  # Prefer: respond-async: answered 202 with a Location to poll, not 409 or 503


@dataclass(frozen=True)
class Scope:
    """A key means something only for one customer on one endpoint."""

    customer: str
    endpoint: str
    key: str


@dataclass(frozen=True)
class Settings:
    lease_seconds: float = 30.0
    lifetime_seconds: float = 24 * 3600
    waiters_per_key: int = 2  # in one process: past this many duplicates waiting on a key, the next answers at once
    poll_seconds: float = 0.1  # how often a waiting duplicate reads the record again
    expected_call_seconds: float | None = None  # a duplicate is told to come back then (never after the lease)


@dataclass(frozen=True)
class StoredResponse:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @classmethod
    def json(cls, status: int, payload: Any, **headers: str) -> StoredResponse:
        """A JSON answer, its bytes fixed once: what is stored is what every replay sends."""
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        return cls(status, {"Content-Type": "application/json", **headers}, body)


# --- how a phase ends: exactly one of these ------------------------------------------------------------------


@dataclass(frozen=True)
class MoveTo:
    """The phase's work is committed; the operation continues from this recovery point."""

    recovery_point: str


@dataclass(frozen=True)
class Complete:
    """The operation has its final answer: stored with the record and replayed from now on."""

    response: StoredResponse


Step = MoveTo | Complete


@dataclass(frozen=True)
class RecordView:
    """What a caller may know of a record: never the row itself."""

    id: int | str
    scope: Scope
    fingerprint: str
    state: str
    recovery_point: str
    lease_live: bool
    lease_holder: str | None  # the worker (host:pid) whose lease is live
    locked_until: datetime | None
    reference: str | None
    response: StoredResponse | None
    duplicates: int
    created_at: datetime
    updated_at: datetime

    @property
    def completed(self) -> bool:
        return self.state == COMPLETED

    def retry_after(self, now: datetime, expected_call_seconds: float | None) -> int:
        """When trying again makes sense: when the holder's call is expected to have been answered, and
        never later than its lease runs out (then a retry takes over). At least 1 second."""
        if self.locked_until is None:
            return 1
        wait = (self.locked_until - now).total_seconds()
        if expected_call_seconds is not None:
            # The holder's last step (the move to the recovery point of its call) is when the call began.
            expected_left = (self.updated_at + timedelta(seconds=expected_call_seconds) - now).total_seconds()
            # Late: look again in a second, then as long as it has been late, at most one more expected call
            # (a dead holder's lease runs out meanwhile). A whole call more would cost a retry just behind it.
            late = -expected_left
            wait = min(wait, expected_left if expected_left > 0 else min(expected_call_seconds, max(1.0, late)))
        return max(1, math.ceil(wait))
