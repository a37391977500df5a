"""Claim a key, run the operation in atomic phases, store and replay the answer.

The store's atomic claim decides which of two racing requests wins (the first read is only a shortcut); a phase
calls out with no transaction open, then commits one owner-checked step. ``RetryLater`` stores no outcome.
Design: docs/design.md#checkoutidempotencyenginepy-claim-phases-replay
"""

from __future__ import annotations

import enum
import hmac
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from checkout.database import assert_idle, utcnow, writing
from checkout.extensions import db
from checkout.idempotency.audit import note
from checkout.idempotency.sql_store import SQL_STORE
from checkout.idempotency.store import NO_STORE, Held, RecordStore
from checkout.idempotency.types import (
    FINISHED,
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

T = TypeVar("T")

# Of several requests racing for a released lease, the losers look again; a few rounds settle it.
ATTEMPTS = 5


# --- reading ---------------------------------------------------------------------


def peek(scope: Scope, store: RecordStore = SQL_STORE) -> RecordView | None:
    """The record for a scope, read without claiming anything (SQL: one indexed read, no lock)."""
    return store.find(scope)


def same_fingerprint(stored: str, offered: str) -> bool:
    """The fingerprint check, the one comparison in the tree: is this the request the key was first used for?"""
    return hmac.compare_digest(stored, offered)


# --- one attempt: look, then claim, replay, refuse, conflict or take over ----------


def _stored_then_noted(store: RecordStore, write: Callable[[], T], notes: Callable[[T], None]) -> T:
    """A store's write and its audit notes: in one unit of work when the store joins the transaction;
    else the write first, on its own (no database transaction waits on a network call), then the notes."""
    if store.joins_transaction:
        with writing(durable=False):
            done = write()
            notes(done)
        return done
    done = write()
    with writing(durable=False):
        notes(done)
    return done


def _record_after_commit(operation: Operation, step: Step) -> None:
    """Write a committed phase's step to a store outside its transaction.

    The database already holds the phase's work, whatever the store says. If
    the record is gone or someone else's (Redis lost it, a takeover), a
    completed outcome is still true; any other step stops here (LeaseLost).
    """
    lost = False
    try:
        operation.apply(step)  # its own audit note waits for the unit of work below
    except LeaseLost:
        lost = True
    with writing(durable=False):
        if lost:
            note(
                operation.scope, Event.RECORD_LOST, recovery_point=operation.recovery_point, store=operation.store.name
            )
    if not lost:
        return
    if not isinstance(step, Complete):
        raise LeaseLost(f"operation {operation.scope.key!r}: its record is gone or someone else's")
    operation.response = step.response


def _claim(
    store: RecordStore, scope: Scope, fingerprint: str, first: Phase, settings: Settings
) -> Operation | Outcome | None:
    """Claim the record and run the first phase; None if another request won the claim.

    A store that joins the transaction claims in the first phase's own
    transaction, so a refusal or a crash leaves nothing. Another claims first,
    on its own, and discards its claim when the phase does not commit.
    """
    if first.call is not None:
        raise TypeError("the first phase runs inside the claim's transaction: it cannot call outside")
    owner = secrets.token_hex(16)
    joins = store.joins_transaction
    held = None if joins else store.claim(scope, fingerprint, owner, settings)
    if not joins and held is None:
        return None  # the store chose another request; look at its record
    try:
        with writing():
            if joins:
                held = store.claim(scope, fingerprint, owner, settings)
                if held is None:
                    return None
            assert held is not None
            operation = Operation(store, scope, held, resumed=False, settings=settings)
            note(scope, Event.RECEIVED)
            note(scope, Event.CLAIMED, owner=owner[:8], store=store.name)
            step = first.commit(operation, None)
            if joins:
                operation.apply(step)
    except BaseException as error:
        if held is not None and not joins:
            store.discard(held)  # the phase did not commit: the key is usable again
        if isinstance(error, Refuse):
            return Refused(error.response, error.reference)  # nothing is stored
        raise
    if not joins:
        try:
            _record_after_commit(operation, step)
        except LeaseLost:
            with writing(durable=False):
                note(scope, Event.LEASE_LOST)
            return InProgress(retry_after=1, reference=operation.reference)  # a retry claims again
    if operation.response is not None:  # the first phase completed it (an answer known at once)
        return Done(operation.response, replayed=False)
    return operation


def _answer_existing(
    store: RecordStore, view: RecordView, fingerprint: str, settings: Settings, *, first_look: bool
) -> Operation | Outcome | None:
    """What an existing record means for this request; None when a racing retry took the lease first."""
    scope = view.scope
    now = utcnow()
    # A request is "received" once, at its first look; a duplicate that waited looks again later.
    if not same_fingerprint(view.fingerprint, fingerprint):
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
        retry_after = view.retry_after(now, settings.expected_call_seconds)
        if first_look:

            def noted(_nothing: None) -> None:
                note(scope, Event.RECEIVED)
                note(scope, Event.CONFLICT, retry_after=retry_after)

            _stored_then_noted(store, lambda: store.count_duplicate(view), noted)
        return InProgress(retry_after, view.reference)
    # The lease expired (a crashed worker) or was released (an unknown outcome): take it over.
    return take_over(view, settings, received=first_look, store=store)


def take_over(
    view: RecordView,
    settings: Settings,
    *,
    by: Event = Event.RESUMED,
    received: bool = False,
    store: RecordStore = SQL_STORE,
) -> Operation | None:
    """Take an expired or released lease with the store's compare-and-set (None if someone else won)."""
    owner = secrets.token_hex(16)

    def noted(held: Held | None) -> None:
        if held is None:
            return
        if received:
            note(view.scope, Event.RECEIVED)
        # A lease that had a holder and ran out: a takeover (the holder died or hung), not a resumption.
        expired = view.locked_until is not None and not view.lease_live
        note(view.scope, by, recovery_point=held.recovery_point, owner=owner[:8], expired_lease=expired or None)

    held = _stored_then_noted(store, lambda: store.take_over(view, owner, settings), noted)
    return Operation(store, view.scope, held, resumed=True, settings=settings) if held is not None else None


def _attempt(
    store: RecordStore,
    scope: Scope,
    fingerprint: str,
    phases: Mapping[str, Phase],
    settings: Settings,
    *,
    first_look: bool,
) -> Operation | Outcome:
    for _ in range(ATTEMPTS):
        view = peek(scope, store)
        decided = (
            _claim(store, scope, fingerprint, phases[STARTED], settings)
            if view is None
            else _answer_existing(store, view, fingerprint, settings, first_look=first_look)
        )
        if decided is not None:
            return decided
        # We lost a race (the claim, or a takeover) and noted nothing: the next look is still
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


def _wait_for_change(store: RecordStore, scope: Scope, settings: Settings, deadline: float) -> bool:
    """Poll with plain reads until the record is completed or its lease is free; False at the deadline."""
    pause = threading.Event()
    while time.monotonic() < deadline:
        # Never sleep inside a transaction: end the last read (it pinned a snapshot on SQLite),
        # so the next look sees what the owner has committed since.
        db.session.rollback()
        pause.wait(min(settings.poll_seconds, max(0.0, deadline - time.monotonic())))
        view = peek(scope, store)
        if view is None or view.completed or not view.lease_live:
            return True
    return False


# --- the operation: the right to run it, as long as our owner token holds ------------


class Operation:
    """The right to run one operation, as long as our owner token holds in the store."""

    def __init__(self, store: RecordStore, scope: Scope, held: Held, *, resumed: bool, settings: Settings) -> None:
        self.store = store
        self.scope = scope
        self.held = held
        self.resumed = resumed
        self.settings = settings
        self.duplicates = 0
        self.response: StoredResponse | None = None  # set once the operation completes
        self._checked = False  # whether the current unit of work has written our record yet

    @property
    def owner(self) -> str:
        """Our random token: the store lets a write through only while it is the record's."""
        return self.held.owner

    @property
    def recovery_point(self) -> str:
        return self.held.recovery_point

    @property
    def reference(self) -> str | None:
        """What the operation made (an order's id): saved with its next step, shown to duplicates."""
        return self.held.reference

    @reference.setter
    def reference(self, value: str | None) -> None:
        self.held.reference = value

    def renew_lease(self) -> None:
        self.duplicates = self.store.save_step(self.held, MoveTo(self.recovery_point), self.settings)
        self._checked = True

    @contextmanager
    def owned(self) -> Iterator[None]:
        """One unit of work that ends with an owner-checked write of our record.

        The block ends the phase with ``apply`` (or the lease is renewed),
        which matches only while our owner token holds. If another worker took
        the operation over meanwhile, LeaseLost rolls the whole transaction
        back: nothing a lost owner wrote survives. (On PostgreSQL every phase
        locks the rows it changes before the record row, and a takeover locks
        only the record row: no lock cycle.)
        """
        self._checked = False
        with writing():
            yield
            if not self._checked:
                self.renew_lease()

    def apply(self, step: Step) -> None:
        """End a phase, inside the transaction the caller holds: move the recovery point (renewing the
        lease), or store the answer. LeaseLost if the record is no longer ours."""
        if not isinstance(step, MoveTo | Complete):
            raise TypeError(f"a phase must end with MoveTo or Complete, not {step!r}")
        self.duplicates = self.store.save_step(self.held, step, self.settings)
        self._checked = True
        if isinstance(step, MoveTo):
            self.held.recovery_point = step.recovery_point
            return
        note(self.scope, Event.COMPLETED, status=step.response.status)
        self.held.recovery_point = FINISHED
        self.response = step.response

    def note(self, event: enum.StrEnum, **detail: Any) -> None:
        note(self.scope, event, **detail)

    def release(self, reason: str, event: enum.StrEnum | None = None, **detail: Any) -> None:
        """Give the lease back without an outcome, so a retry resumes at once (in its own transaction).

        ``event`` (what went wrong, e.g. answer_lost) is recorded with the release.
        """
        joins = self.store.joins_transaction
        released = False if joins else self._give_back()  # a store outside the database: before the unit
        with writing():
            if joins:
                released = self.store.release(self.held)
            if event:
                note(self.scope, event, **detail)
            if released:
                note(self.scope, Event.RELEASED, reason=reason, recovery_point=self.recovery_point)

    def _give_back(self) -> bool:
        try:
            return self.store.release(self.held)
        except Exception:  # a store outside the database that does not answer: the lease runs out by itself
            return False

    def discard(self, reason: str) -> None:
        """Delete the record (nothing happened under it), so the next retry starts afresh."""
        with writing():
            if not self.store.discard(self.held):
                raise LeaseLost(f"operation {self.scope.key!r} is no longer ours")
            note(self.scope, Event.DISCARDED, reason=reason)


# --- running the phases --------------------------------------------------------------


def _commit_phase(operation: Operation, phase: Phase, value: object) -> None:
    if operation.store.joins_transaction:
        with operation.owned():
            operation.apply(phase.commit(operation, value))
        return
    with writing():
        step = phase.commit(operation, value)
    _record_after_commit(operation, step)


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
            _commit_phase(operation, phase, value)
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
    scope: Scope,
    fingerprint: str,
    phases: Mapping[str, Phase],
    *,
    settings: Settings,
    wait_seconds: float = 0.0,
    store: RecordStore = SQL_STORE,
) -> Operation | Outcome:
    """Claim (or take over) the key and run the first phase; do not advance further.

    ``run`` is this plus ``_advance``. Tests use it to play a worker that dies
    right after its first phase.
    """
    outcome = _attempt(store, scope, fingerprint, phases, settings, first_look=True)
    if isinstance(outcome, InProgress) and wait_seconds > 0:
        with _waiting_slot(scope, settings.waiters_per_key) as admitted:
            deadline = time.monotonic() + wait_seconds
            while admitted and isinstance(outcome, InProgress) and _wait_for_change(store, scope, settings, deadline):
                outcome = _attempt(store, scope, fingerprint, phases, settings, first_look=False)
            if admitted and isinstance(outcome, InProgress):
                outcome = _told_after_waiting(store, scope, settings, outcome)
    return outcome


def _told_after_waiting(store: RecordStore, scope: Scope, settings: Settings, outcome: InProgress) -> InProgress:
    """A waiter that gave up is told when to come back as of now, not as of when it arrived."""
    view = peek(scope, store)
    if view is None or not view.lease_live:
        return replace(outcome, retry_after=1)  # free now: a retry claims or takes over at once
    return replace(outcome, retry_after=view.retry_after(utcnow(), settings.expected_call_seconds))


def run(
    scope: Scope,
    fingerprint: str,
    phases: Mapping[str, Phase],
    *,
    settings: Settings,
    wait_seconds: float = 0.0,
    store: RecordStore | None = SQL_STORE,
) -> Outcome:
    """Run the operation at most once for this scope, whatever the retries and races.

    ``phases`` maps each recovery point to its Phase; ``phases[STARTED]``
    runs inside the claim's transaction. A request that finds the key in
    progress waits up to ``wait_seconds`` (browsers, ``Prefer: wait``), or
    returns ``InProgress`` at once. ``store=None``: no idempotency at all, the
    phases run through every time (the lab's unsafe twins).
    """
    store = NO_STORE if store is None else store
    claimed = begin(scope, fingerprint, phases, settings=settings, wait_seconds=wait_seconds, store=store)
    if not isinstance(claimed, Operation):
        return claimed
    return _advance(claimed, phases)


# --- housekeeping (the SQL store's) --------------------------------------------------------


def abandoned(settings: Settings, *, now: datetime | None = None) -> list[RecordView]:
    """In-progress records nobody is working on: the lease expired, or was released a lease ago."""
    return SQL_STORE.abandoned(settings, now=now)


def purge(
    settings: Settings, now: datetime | None = None, batch: int = 5000, *, expired_by: datetime | None = None
) -> int:
    """Delete completed records past their lifetime with their audit events (SqlStore.purge)."""
    return SQL_STORE.purge(settings, now, batch, expired_by=expired_by)
