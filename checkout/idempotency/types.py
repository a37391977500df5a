"""The engine's vocabulary: what a key belongs to, its settings, the stored answer, the steps a
phase may end with, the outcomes a view turns into HTTP, and the read model of a record."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from checkout.idempotency.engine import Operation

IN_PROGRESS = "in_progress"
COMPLETED = "completed"

# The recovery point every operation starts from. Callers name the ones after it; a
# record is never committed at STARTED (its claim and first phase are one transaction).
STARTED = "started"
FINISHED = "finished"


class Event(enum.StrEnum):
    """What the engine records in the audit trail. Callers add their own enums; the names never
    collide with recovery points, which say where an operation is, not what happened."""

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
    # Per worker process: past this many duplicates waiting on one key, the next answers at once.
    waiters_per_key: int = 2
    # How often a waiting duplicate looks again (a read, never a write).
    poll_seconds: float = 0.1
    # How long this operation's outside call is expected to take (per request: the caller knows its
    # provider); a duplicate is told to come back then, never later than the holder's lease.
    expected_call_seconds: float | None = None


@dataclass(frozen=True)
class StoredResponse:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


# --- how a phase ends: exactly one of these ----------------------------------


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
class Phase:
    """What to do from one recovery point.

    ``call`` (optional) talks to the outside world, with no transaction open:
    a remote provider may be slow, and no lock may wait on it. ``commit`` then
    runs in one owner-checked transaction with what ``call`` returned, and ends
    by returning exactly one Step.
    """

    commit: Callable[[Operation, Any], Step]
    call: Callable[[Operation], Any] | None = None


# --- outcomes a view turns into HTTP -------------------------------------------


@dataclass(frozen=True)
class Done:
    """The operation has its final answer.

    ``replayed``: an earlier request produced it. ``duplicates``: how many
    other requests with the key arrived while it ran (a fact on the record).
    """

    response: StoredResponse
    replayed: bool
    duplicates: int = 0


@dataclass(frozen=True)
class InProgress:
    """Another request owns the key right now. ``reference``: what the operation created, if anything yet."""

    retry_after: int
    reference: str | None = None


@dataclass(frozen=True)
class Mismatch:
    """The key was first used for a different request; its record is untouched."""


@dataclass(frozen=True)
class Unfinished:
    """This attempt could not reach an outcome; the lease is released and a retry resumes."""

    retry_after: int
    reason: str
    reference: str | None = None


@dataclass(frozen=True)
class Refused:
    """The first phase refused the request; nothing at all was stored, so the key stays usable."""

    response: StoredResponse
    reference: str | None = None  # refused as in progress: what is being made meanwhile, and may be polled


Outcome = Done | InProgress | Mismatch | Unfinished | Refused


@dataclass(frozen=True)
class RecordView:
    """What a view may know about a record: never the ORM row."""

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
            # Late: give it one more expected call's time (a dead holder's lease runs out meanwhile).
            wait = min(wait, expected_left if expected_left > 0 else expected_call_seconds)
        return max(1, math.ceil(wait))


# --- signals a phase may raise -------------------------------------------------


class RetryLater(Exception):
    """The outcome is not known yet (a provider is down, its answer was lost): nothing is stored.

    ``event`` and ``detail`` name what happened, for the audit trail; they are
    written in the same transaction that releases the lease.
    """

    def __init__(self, reason: str, retry_after: int = 1, *, event: enum.StrEnum | None = None, **detail: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.event = event
        self.detail = detail


class Refuse(Exception):
    """Raised by the first phase: answer this, and store nothing (the claim is rolled back)."""

    def __init__(self, response: StoredResponse, reference: str | None = None) -> None:
        super().__init__(response.status)
        self.response = response
        self.reference = reference


class LeaseLost(Exception):
    """Another worker took the operation over; this one must stop writing."""
