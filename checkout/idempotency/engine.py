"""Claim a key, run the operation in atomic phases, store and replay the answer.

The flow, for one (customer, endpoint, key):

1. Look: one indexed read of the record. Most retries end here: a completed
   record is replayed, a different fingerprint is a mismatch, a live lease is
   a conflict (or, for a browser, a short wait that only reads).
2. Claim: one ``INSERT ... ON CONFLICT DO NOTHING``, in the same transaction
   as the operation's first phase (creating the order). The unique index
   decides which of two racing requests wins; the loser reads the winner's
   record. The read in step 1 is only a shortcut: the INSERT is the arbiter.
3. Phases: from each recovery point, a ``Phase`` calls the outside world
   with no transaction open, then commits in one owner-checked transaction
   that ends with exactly one step: move to the next recovery point, or
   complete with the response to store.
4. An expired or released lease is taken over by a compare-and-set UPDATE,
   and the operation resumes from its recovery point.

If a phase cannot know its outcome yet (a provider is down, its answer was
lost) it raises ``RetryLater``: the lease is released at once and nothing is
stored as the outcome, so the next retry resumes immediately.
"""

from __future__ import annotations

import hmac
import math
import secrets
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from checkout.database import insert_ignoring_conflicts, table_of, utcnow
from checkout.extensions import db
from checkout.idempotency.audit import note
from checkout.idempotency.models import IdempotencyEvent, IdempotencyRecord
from checkout.idempotency.operation import Operation, lease_values
from checkout.idempotency.types import (
    COMPLETED,
    IN_PROGRESS,
    STARTED,
    Done,
    Event,
    InProgress,
    LeaseLost,
    Mismatch,
    Outcome,
    Phase,
    RecordView,
    Refuse,
    Refused,
    RetryLater,
    Scope,
    Settings,
    StoredResponse,
    Unfinished,
)
from checkout.transactions import assert_idle, writing

records = table_of(IdempotencyRecord)
events = table_of(IdempotencyEvent)

# The statements every request runs, built once (executed with parameters).
_PEEK = sa.select(records).where(
    records.c.customer == sa.bindparam("_customer"),
    records.c.endpoint == sa.bindparam("_endpoint"),
    records.c.key == sa.bindparam("_key"),
)

# Of several requests racing for a released lease, the losers look again; a few rounds settle it.
ATTEMPTS = 5


# --- reading ---------------------------------------------------------------------


def _view(record: Any, now: datetime) -> RecordView:
    """The read model of a record row (a Core row: no ORM object crosses into a view)."""
    response = None
    if record.response_status is not None:
        response = StoredResponse(
            record.response_status, dict(record.response_headers or {}), record.response_body or b""
        )
    live = record.locked_by is not None and record.locked_until is not None and record.locked_until > now
    return RecordView(
        id=record.id,
        scope=Scope(record.customer, record.endpoint, record.key),
        fingerprint=record.fingerprint,
        state=record.state,
        recovery_point=record.recovery_point,
        lease_live=live,
        lease_holder=record.worker if live else None,
        locked_until=record.locked_until,
        reference=record.reference,
        response=response,
        duplicates=record.duplicates,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def peek(scope: Scope) -> RecordView | None:
    """The record for a scope, read without claiming anything: one indexed read, no lock."""
    record = db.session.execute(
        _PEEK, {"_customer": scope.customer, "_endpoint": scope.endpoint, "_key": scope.key}
    ).first()
    return _view(record, utcnow()) if record is not None else None


def _retry_after(view: RecordView, now: datetime, expected_call_seconds: float | None) -> int:
    """When trying again makes sense: when the holder's call is expected to have been answered, and
    never later than its lease runs out (then a retry takes over). At least 1 second."""
    if view.locked_until is None:
        return 1
    wait = (view.locked_until - now).total_seconds()
    if expected_call_seconds is not None:
        # The holder's last step (the move to the recovery point of its call) is when the call began.
        expected_left = (view.updated_at + timedelta(seconds=expected_call_seconds) - now).total_seconds()
        # Late: give it one more expected call's time (a dead holder's lease runs out meanwhile).
        wait = min(wait, expected_left if expected_left > 0 else expected_call_seconds)
    return max(1, math.ceil(wait))


def _same_fingerprint(stored: str, offered: str) -> bool:
    return hmac.compare_digest(stored, offered)


# --- one attempt: look, then claim, replay, refuse, conflict or take over ----------


def _claim(scope: Scope, fingerprint: str, first: Phase, settings: Settings) -> Operation | Outcome | None:
    """Insert the record and run the first phase in the same transaction; None if another request won."""
    if first.call is not None:
        raise TypeError("the first phase runs inside the claim's transaction: it cannot call outside")
    now = utcnow()
    owner = secrets.token_hex(16)
    try:
        with writing() as session:
            record_id = session.execute(
                insert_ignoring_conflicts(records, session).returning(records.c.id),
                {
                    "customer": scope.customer,
                    "endpoint": scope.endpoint,
                    "key": scope.key,
                    "fingerprint": fingerprint,
                    "state": IN_PROGRESS,
                    "recovery_point": STARTED,
                    "duplicates": 0,
                    "created_at": now,
                    "updated_at": now,
                    "expires_at": now + timedelta(seconds=settings.lifetime_seconds),
                    **lease_values(owner, settings),
                },
            ).scalar_one_or_none()
            if record_id is None:
                return None  # the unique index chose another request; look at its record
            operation = Operation(scope, record_id, owner, STARTED, resumed=False, settings=settings)
            note(scope, Event.RECEIVED)
            note(scope, Event.CLAIMED, owner=owner[:8])
            operation.apply(first.commit(operation, None))
    except Refuse as refused:
        return Refused(refused.response)  # the whole claim was rolled back: nothing is stored
    if operation.response is not None:  # the first phase completed it (an answer known at once)
        return Done(operation.response, replayed=False)
    return operation


def _answer_existing(
    view: RecordView, fingerprint: str, settings: Settings, *, first_look: bool
) -> Operation | Outcome | None:
    """What an existing record means for this request; None when a racing retry took the lease first."""
    scope = view.scope
    now = utcnow()
    # A request is "received" once, at its first look; a duplicate that waited looks again later.
    if not _same_fingerprint(view.fingerprint, fingerprint):
        with writing(durable=False):
            if first_look:
                note(scope, Event.RECEIVED)
            note(scope, Event.MISMATCH)
        return Mismatch()
    if view.completed and view.response is not None:
        with writing(durable=False):
            if first_look:
                note(scope, Event.RECEIVED)
            note(scope, Event.REPLAYED, status=view.response.status)
        return Done(view.response, replayed=True, duplicates=view.duplicates)
    if view.lease_live:
        retry_after = _retry_after(view, now, settings.expected_call_seconds)
        if first_look:
            with writing(durable=False) as session:
                session.execute(
                    sa.update(records).where(records.c.id == view.id).values(duplicates=records.c.duplicates + 1)
                )
                note(scope, Event.RECEIVED)
                note(scope, Event.CONFLICT, retry_after=retry_after)
        return InProgress(retry_after, view.reference)
    # The lease expired (a crashed worker) or was released (an unknown outcome): take it over.
    return take_over(view, settings, received=first_look)


def take_over(
    view: RecordView, settings: Settings, *, by: Event = Event.RESUMED, received: bool = False
) -> Operation | None:
    """Take an expired or released lease with a compare-and-set UPDATE (None if someone else won).

    The UPDATE only matches while the lease is still free, so of two racing
    retries exactly one changes the row. On PostgreSQL the loser waits for the
    winner's row lock, re-reads the row and no longer matches.
    """
    now = utcnow()
    owner = secrets.token_hex(16)
    with writing() as session:
        taken = session.execute(
            sa.update(records)
            .where(
                records.c.id == view.id,
                records.c.state == IN_PROGRESS,
                sa.or_(records.c.locked_by.is_(None), records.c.locked_until < now),
            )
            .values(updated_at=now, **lease_values(owner, settings))
            .returning(records.c.recovery_point, records.c.reference)
        ).first()
        if taken is None:
            return None
        recovery_point, reference = taken
        if received:
            note(view.scope, Event.RECEIVED)
        # A lease that had a holder and ran out: a takeover (the holder died or hung), not a resumption.
        expired = view.locked_until is not None and not view.lease_live
        note(view.scope, by, recovery_point=recovery_point, owner=owner[:8], expired_lease=expired or None)
    operation = Operation(view.scope, view.id, owner, recovery_point, resumed=True, settings=settings)
    operation.reference = reference
    return operation


def _attempt(
    scope: Scope, fingerprint: str, phases: Mapping[str, Phase], settings: Settings, *, first_look: bool
) -> Operation | Outcome:
    for _ in range(ATTEMPTS):
        view = peek(scope)
        decided = (
            _claim(scope, fingerprint, phases[STARTED], settings)
            if view is None
            else _answer_existing(view, fingerprint, settings, first_look=first_look)
        )
        if decided is not None:
            return decided
        # We lost a race (the claim's INSERT, or a takeover) and noted nothing: the next look is still
        # this request's first in the audit trail, so it is received, and counted as a conflict, once.
    return InProgress(retry_after=1)


# --- waiting, bounded: a few duplicates per key wait, the rest answer at once -------

_waiting: Counter[Scope] = Counter()
_waiting_lock = threading.Lock()


@contextmanager
def _waiting_slot(scope: Scope, limit: int) -> Iterator[bool]:
    with _waiting_lock:
        admitted = _waiting[scope] < limit
        if admitted:
            _waiting[scope] += 1
    try:
        yield admitted
    finally:
        if admitted:
            with _waiting_lock:
                _waiting[scope] -= 1
                if not _waiting[scope]:
                    del _waiting[scope]


def _wait_for_change(scope: Scope, settings: Settings, deadline: float) -> bool:
    """Poll with plain reads until the record is completed or its lease is free; False at the deadline."""
    pause = threading.Event()
    while time.monotonic() < deadline:
        # Never sleep inside a transaction: end the last read (it pinned a snapshot on SQLite),
        # so the next look sees what the owner has committed since.
        db.session.rollback()
        pause.wait(min(settings.poll_seconds, max(0.0, deadline - time.monotonic())))
        view = peek(scope)
        if view is None or view.completed or not view.lease_live:
            return True
    return False


# --- running the phases --------------------------------------------------------------


def _advance(operation: Operation, phases: Mapping[str, Phase]) -> Outcome:
    """Run the phases from the operation's recovery point until it completes or must stop."""
    scope = operation.scope
    try:
        while True:
            phase = phases.get(operation.recovery_point)
            if phase is None:
                raise RuntimeError(f"{scope.endpoint}: no phase resumes from {operation.recovery_point!r}")
            value = None
            if phase.call is not None:
                assert_idle()
                value = phase.call(operation)
            with operation.owned():
                operation.apply(phase.commit(operation, value))
            if operation.response is not None:
                return Done(operation.response, replayed=False, duplicates=operation.duplicates)
    except RetryLater as later:
        operation.release(later.reason, later.event, **later.detail)
        return Unfinished(later.retry_after, later.reason, operation.reference)
    except LeaseLost:
        with writing(durable=False):
            note(scope, Event.LEASE_LOST)
        return InProgress(retry_after=1, reference=operation.reference)
    except BaseException:
        db.session.rollback()
        operation.release("error")
        raise


def begin(
    scope: Scope, fingerprint: str, phases: Mapping[str, Phase], *, settings: Settings, wait_seconds: float = 0.0
) -> Operation | Outcome:
    """Claim (or take over) the key and run the first phase; do not advance further.

    ``run`` is this plus ``_advance``. Tests use it to play a worker that dies
    right after its first phase.
    """
    outcome = _attempt(scope, fingerprint, phases, settings, first_look=True)
    if isinstance(outcome, InProgress) and wait_seconds > 0:
        with _waiting_slot(scope, settings.waiters_per_key) as admitted:
            deadline = time.monotonic() + wait_seconds
            while admitted and isinstance(outcome, InProgress) and _wait_for_change(scope, settings, deadline):
                outcome = _attempt(scope, fingerprint, phases, settings, first_look=False)
    return outcome


def run(
    scope: Scope, fingerprint: str, phases: Mapping[str, Phase], *, settings: Settings, wait_seconds: float = 0.0
) -> Outcome:
    """Run the operation at most once for this scope, whatever the retries and races.

    ``phases`` maps each recovery point to its Phase; ``phases[STARTED]``
    runs inside the claim's transaction. A request that finds the key in
    progress waits up to ``wait_seconds`` (browsers, ``Prefer: wait``), or
    returns ``InProgress`` at once.
    """
    claimed = begin(scope, fingerprint, phases, settings=settings, wait_seconds=wait_seconds)
    if not isinstance(claimed, Operation):
        return claimed
    return _advance(claimed, phases)


# --- housekeeping ------------------------------------------------------------------------


def abandoned(settings: Settings, *, now: datetime | None = None) -> list[RecordView]:
    """In-progress records nobody is working on: the lease expired, or was released a lease ago."""
    now = now or utcnow()
    quiet_since = now - timedelta(seconds=settings.lease_seconds)
    stale = db.session.execute(
        sa.select(records)
        .where(
            records.c.state == IN_PROGRESS,
            sa.or_(
                records.c.locked_until < now,
                sa.and_(records.c.locked_by.is_(None), records.c.updated_at < quiet_since),
            ),
        )
        .order_by(records.c.id)
    ).all()
    return [_view(record, now) for record in stale]


PURGE_BATCH = 5000  # rows per transaction: each is short, so no statement or lock waits long behind it


def purge(settings: Settings, now: datetime | None = None, batch: int = PURGE_BATCH) -> int:
    """Delete completed records past their lifetime with their audit events, and events past it.

    Never an unfinished record: reconcile finishes those first. In batches of ``batch`` rows,
    one short transaction each, so a large backlog neither outlives the statement timeout nor
    holds the locks a late retry of those keys waits for.
    """
    now = now or utcnow()
    removed = 0
    while True:
        with writing() as session:
            expired = session.execute(
                sa.select(records.c.id, records.c.customer, records.c.endpoint, records.c.key)
                .where(records.c.state == COMPLETED, records.c.expires_at < now)
                .order_by(records.c.id)
                .limit(batch)
            ).all()
            if expired:
                session.execute(
                    sa.delete(events).where(
                        sa.tuple_(events.c.customer, events.c.endpoint, events.c.key).in_(
                            [(row.customer, row.endpoint, row.key) for row in expired]
                        )
                    )
                )
                session.execute(sa.delete(records).where(records.c.id.in_([row.id for row in expired])))
        removed += len(expired)
        if len(expired) < batch:
            break
    old = now - timedelta(seconds=settings.lifetime_seconds)
    while True:
        with writing() as session:
            gone = len(
                session.execute(
                    sa.delete(events)
                    .where(events.c.id.in_(sa.select(events.c.id).where(events.c.created_at < old).limit(batch)))
                    .returning(events.c.id)
                ).all()
            )
        if gone < batch:
            return removed
