"""Run an operation at most once per key: look, claim, wait, take over, then advance through its phases.

``run`` comes first and its helpers follow in the order it calls them. The store's atomic claim decides which of
two racing requests wins (the first look is a shortcut). A phase calls out with no transaction open, then commits
one owner-checked step; ``RetryLater`` stores no outcome, so a retry resumes."""

from __future__ import annotations

import enum
import hmac
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from .outcomes import Done, InProgress, LeaseLost, Mismatch, Outcome, Refuse, Refused, RetryLater, Unfinished
from .signals import listening, note
from .store import Held, RecordStore
from .types import FINISHED, STARTED, Complete, Event, MoveTo, RecordView, Scope, Settings, Step, StoredResponse
from .units import assert_idle, session, utcnow, writing

T = TypeVar("T")
ATTEMPTS = 5  # of several requests racing for a free lease, the losers look again; a few rounds settle it


@dataclass(frozen=True)
class Phase:
    """What to do from one recovery point: ``call`` (optional) talks to the outside world with no transaction open,
    then ``commit`` runs in one owner-checked unit of work with what it returned, and ends with one Step."""

    commit: Callable[[Operation, Any], Step]
    call: Callable[[Operation], Any] | None = None


Phases = Mapping[str, Phase]  # each recovery point's phase; phases[STARTED] runs in the claim's unit of work


@dataclass(frozen=True)
class Asked:
    """One request under a key: what every look at its record needs. ``settled``: whether what a reference names
    is final by another path (a webhook paid the order), so a duplicate that waits on the key stops waiting."""

    store: RecordStore
    scope: Scope
    fingerprint: str
    phases: Phases
    settings: Settings
    settled: Callable[[str], bool] | None = None


def run(asked: Asked, *, wait: float = 0) -> Outcome:
    """Run the operation at most once for this scope, whatever the retries and races. A request that finds the
    key in progress waits up to ``wait`` seconds for its outcome, or is told InProgress at once."""
    claimed = begin(asked, wait=wait)
    return advance(claimed, asked.phases) if isinstance(claimed, Operation) else claimed


def begin(asked: Asked, *, wait: float = 0) -> Operation | Outcome:
    """Claim (or take over) the key and run its first phase, no further (a test plays a worker dying there)."""
    outcome = look(asked, first_look=True)
    return _wait(asked, outcome, wait) if isinstance(outcome, InProgress) and wait > 0 else outcome


def advance(operation: Operation, phases: Phases) -> Outcome:
    """Run the phases from the operation's recovery point until it completes or must stop."""
    try:
        while operation.response is None:
            phase = phases.get(operation.recovery_point)
            if phase is None:
                raise RuntimeError(f"{operation.scope.endpoint}: no phase resumes from {operation.recovery_point!r}")
            value = None
            if phase.call is not None:
                assert_idle()
                value = phase.call(operation)
            operation.seam.committed(operation, partial(phase.commit, operation, value))
        return Done(operation.response, replayed=False, duplicates=operation.duplicates)
    except RetryLater as later:
        operation.release(later.reason, later.event, **later.detail)
        return Unfinished(later.retry_after, later.reason, operation.reference)
    except Refuse as refused:  # a later phase that made nothing yet: the key is usable again, as after the first
        with suppress(LeaseLost):  # lost meanwhile: whoever holds it answers it
            operation.discard("refused")
        return Refused(refused.response, refused.reference)
    except LeaseLost:
        return _lease_lost(operation.scope, operation.reference)
    except BaseException:
        session().rollback()
        operation.release("error")
        raise


# --- one look: claim, replay, refuse, conflict or take over -------------------------------------------------


def peek(scope: Scope, store: RecordStore) -> RecordView | None:  # read without claiming (SQL: one indexed read)
    return store.find(scope)


def look(asked: Asked, *, first_look: bool) -> Operation | Outcome:
    """Claim the key, or answer what its record says (a replay, a mismatch, in progress), or take it over."""
    for _ in range(ATTEMPTS):
        view = peek(asked.scope, asked.store)
        decided = _claim(asked) if view is None else _answer_existing(asked, view, first_look=first_look)
        if decided is not None:
            return decided
        # We lost a race (the claim, or a takeover) and noted nothing: the next look is still this request's first.
    return InProgress(retry_after=1)


def _claim(asked: Asked) -> Operation | Outcome | None:
    """Claim the record and run the first phase; None if another request won the claim."""
    store, scope, first, settings = asked.store, asked.scope, asked.phases[STARTED], asked.settings
    if first.call is not None:
        raise TypeError("the first phase runs inside the claim's unit of work: it cannot call outside")
    owner = secrets.token_hex(16)

    def start(held: Held) -> tuple[Operation, Step]:
        operation = Operation(store, scope, held, resumed=False, settings=settings)
        note(scope, Event.RECEIVED)
        note(scope, Event.CLAIMED, owner=owner[:8], store=store.name)
        return operation, first.commit(operation, None)

    try:
        operation = seam_of(store).claimed(store, lambda: store.claim(scope, asked.fingerprint, owner, settings), start)
    except Refuse as refused:
        return Refused(refused.response, refused.reference)  # nothing is stored: the key stays usable
    except LeaseLost as lost:
        return _lease_lost(scope, lost.reference)  # a store outside the database lost it: a retry claims again
    if operation is not None and operation.response is not None:  # the first phase completed it at once
        return Done(operation.response, replayed=False)
    return operation


def same_fingerprint(stored: str, offered: str) -> bool:
    """The fingerprint check, the one comparison in the tree: is this the request the key was first used for?"""
    return hmac.compare_digest(stored, offered)


def _answer_existing(asked: Asked, view: RecordView, *, first_look: bool) -> Operation | Outcome | None:
    """What an existing record means for this request; None when a racing retry took the lease first. A request
    is "received" once, at its first look (a duplicate that waited looks again later)."""
    store, scope, settings = asked.store, view.scope, asked.settings
    received = [Event.RECEIVED] if first_look else []
    if not same_fingerprint(view.fingerprint, asked.fingerprint):
        with _trail():
            for event in (*received, Event.MISMATCH):
                note(scope, event)
        return Mismatch()
    if view.completed and view.response is not None:
        with _trail():
            for event in received:
                note(scope, event)
            note(scope, Event.REPLAYED, status=view.response.status)
        return Done(view.response, replayed=True, duplicates=view.duplicates)
    if view.lease_live:
        retry_after = view.retry_after(utcnow(), settings.expected_call_seconds)
        if first_look:

            def noted(_counted: None) -> None:
                note(scope, Event.RECEIVED)
                note(scope, Event.CONFLICT, retry_after=retry_after)

            seam_of(store).kept(lambda: store.count_duplicate(view), noted, durable=False)
        return InProgress(retry_after, view.reference)
    # The lease expired (a crashed worker) or was released (an unknown outcome): take it over.
    return take_over(store, view, settings, received=first_look)


def take_over(
    store: RecordStore, view: RecordView, settings: Settings, *, by: Event = Event.RESUMED, received: bool = False
) -> Operation | None:
    """Take an expired or released lease with the store's compare-and-set (None if someone else won)."""
    owner = secrets.token_hex(16)

    def noted(held: Held | None) -> None:
        if held is not None:
            if received:
                note(view.scope, Event.RECEIVED)
            # A lease that had a holder and ran out: a takeover (the holder died or hung), not a resumption.
            expired = view.locked_until is not None and not view.lease_live
            note(view.scope, by, recovery_point=held.recovery_point, owner=owner[:8], expired_lease=expired or None)

    held = seam_of(store).kept(lambda: store.take_over(view, owner, settings), noted, durable=False)
    return Operation(store, view.scope, held, resumed=True, settings=settings) if held is not None else None


def _lease_lost(scope: Scope, reference: str | None) -> InProgress:
    with _trail():
        note(scope, Event.LEASE_LOST)
    return InProgress(retry_after=1, reference=reference)


@contextmanager
def _trail() -> Iterator[None]:
    """A unit of work for notes alone (its commit not waited on by the disk), if anybody listens to them."""
    with writing(durable=False) if listening() else nullcontext():
        yield


# --- waiting, bounded: a few duplicates per key wait, the rest answer at once ---------------------------------

_waiting: Counter[Scope] = Counter()
_waiting_lock = threading.Lock()


def _wait(asked: Asked, told: InProgress, wait: float) -> Operation | Outcome:
    """Look again whenever the record changes, until it has an outcome, its lease is free, or time is up."""
    with _waiting_slot(asked.scope, asked.settings.waiters_per_key) as admitted:
        if not admitted:
            return told
        deadline = time.monotonic() + wait
        decided: Operation | Outcome = told
        while isinstance(decided, InProgress) and not _settled(asked, decided.reference):
            if not _wait_for_change(asked, deadline):
                break
            decided = look(asked, first_look=False)
        if not isinstance(decided, InProgress) or _settled(asked, decided.reference):
            return decided
        view = peek(asked.scope, asked.store)  # given up: told when to come back as of now, not as of when it came
        if view is None or not view.lease_live:
            return replace(decided, retry_after=1)  # free now: a retry claims or takes over at once
        return replace(decided, retry_after=view.retry_after(utcnow(), asked.settings.expected_call_seconds))


@contextmanager
def _waiting_slot(scope: Scope, limit: int) -> Iterator[bool]:
    with _waiting_lock:
        admitted = _waiting[scope] < limit
        _waiting[scope] += admitted
    try:
        yield admitted
    finally:
        if admitted:
            with _waiting_lock:
                _waiting[scope] -= 1
                if not _waiting[scope]:
                    del _waiting[scope]


def _settled(asked: Asked, reference: str | None) -> bool:
    return bool(asked.settled and reference and asked.settled(reference))


def _wait_for_change(asked: Asked, deadline: float) -> bool:
    """Poll with plain reads until the record is completed, its lease is free or what it names is settled
    elsewhere; False at the deadline."""
    pause = threading.Event()
    while time.monotonic() < deadline:
        session().rollback()  # never sleep in a transaction: the last read pinned a snapshot on SQLite
        pause.wait(min(asked.settings.poll_seconds, max(0.0, deadline - time.monotonic())))
        view = peek(asked.scope, asked.store)
        if view is None or view.completed or not view.lease_live or _settled(asked, view.reference):
            return True
    return False


# --- the operation: the right to run it, as long as our owner token holds ----------------------------------


class Operation:
    """The right to run one operation, as long as our owner token holds in the store."""

    def __init__(self, store: RecordStore, scope: Scope, held: Held, *, resumed: bool, settings: Settings) -> None:
        self.store, self.seam, self.scope, self.held = store, seam_of(store), scope, held
        self.resumed, self.settings = resumed, settings
        self.duplicates = 0  # other requests that came with the key while it ran
        self.response: StoredResponse | None = None  # set once the operation completes
        self._checked = False  # whether the current unit of work has written our record yet

    @property
    def owner(self) -> str:  # our random token: the store lets a write through only while it is the record's
        return self.held.owner

    @property
    def recovery_point(self) -> str:  # where it is: the phase that runs next
        return self.held.recovery_point

    @property
    def reference(self) -> str | None:  # what it made (an order's id): saved with its next step, shown to duplicates
        return self.held.reference

    @reference.setter
    def reference(self, value: str | None) -> None:
        self.held.reference = value

    @contextmanager
    def owned(self) -> Iterator[None]:
        """One unit of work that ends with an owner-checked write of our record (``apply``, or a renewed lease):
        if another worker took the operation over meanwhile, LeaseLost rolls all of it back."""
        self._checked = False
        with writing():
            yield
            if not self._checked:
                self.duplicates = self.store.save_step(self.held, MoveTo(self.recovery_point), self.settings)

    def apply(self, step: Step) -> None:
        """End a phase: move the recovery point (renewing the lease) or store the answer; LeaseLost if the
        record is no longer ours."""
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
        """Give the lease back without an outcome, so a retry resumes at once; ``event`` says what went wrong."""

        def noted(released: bool) -> None:
            if event:
                note(self.scope, event, **detail)
            if released:
                note(self.scope, Event.RELEASED, reason=reason, recovery_point=self.recovery_point)

        self.seam.kept(lambda: self.store.release(self.held), noted, durable=True)

    def discard(self, reason: str) -> None:
        """Delete the record (nothing happened under it), so the next retry starts afresh."""
        with writing():
            if not self.store.discard(self.held):
                raise LeaseLost(f"operation {self.scope.key!r} is no longer ours")
            note(self.scope, Event.DISCARDED, reason=reason)


# --- the seam: whether a store's writes join the database's unit of work --------------------------------


class InTransaction:
    """A store in the app's database: its claim and each step are written in the unit of work of the phase they
    end, so one commit decides both, and a refusal or a crash leaves nothing."""

    def claimed(self, store: RecordStore, claim: Callable[[], Held | None], start: Starter) -> Operation | None:
        with writing():
            held = claim()
            if held is None:
                return None
            operation, step = start(held)
            operation.apply(step)
        return operation

    def committed(self, operation: Operation, commit: Callable[[], Step]) -> None:
        with writing():
            operation.apply(commit())

    def kept(self, write: Callable[[], T], then: Callable[[T], None], *, durable: bool) -> T:
        with writing(durable=durable):
            done = write()
            then(done)
        return done


class AfterCommit:
    """A store outside the app's database (Redis): it claims before the first phase's unit of work and records
    each step after the unit commits, so no database transaction waits on it. A claim whose phase does not commit
    is discarded; a step it can no longer record stops the operation, unless that step was its answer."""

    def claimed(self, store: RecordStore, claim: Callable[[], Held | None], start: Starter) -> Operation | None:
        held = claim()
        if held is None:
            return None  # the store chose another request; look at its record
        try:
            with writing():
                operation, step = start(held)
        except BaseException:
            store.discard(held)  # the phase did not commit: the key is usable again
            raise
        self._record(operation, step)
        return operation

    def committed(self, operation: Operation, commit: Callable[[], Step]) -> None:
        with writing():
            step = commit()
        self._record(operation, step)

    def kept(self, write: Callable[[], T], then: Callable[[T], None], *, durable: bool) -> T:
        done = write()
        with writing(durable=durable):
            then(done)
        return done

    @staticmethod
    def _record(operation: Operation, step: Step) -> None:
        """The database holds the phase's work whatever the store says: if the record is gone or someone else's,
        a completed answer is still true; any other step stops here."""
        lost = False
        try:
            operation.apply(step)  # its note is written by the unit below
        except LeaseLost:
            lost = True
        with _trail():
            if lost:
                note(
                    operation.scope,
                    Event.RECORD_LOST,
                    recovery_point=operation.recovery_point,
                    store=operation.store.name,
                )
        if lost and isinstance(step, Complete):
            operation.response = step.response  # its answer stands
        elif lost:
            raise LeaseLost(f"{operation.scope.key!r}: its record is gone or someone else's", operation.reference)


Starter = Callable[[Held], tuple[Operation, Step]]
IN_TRANSACTION, AFTER_COMMIT = InTransaction(), AfterCommit()


def seam_of(store: RecordStore) -> InTransaction | AfterCommit:
    """The one place the engine asks where a store's writes go."""
    return IN_TRANSACTION if store.joins_transaction else AFTER_COMMIT
