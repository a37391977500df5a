"""The right to run one operation: its record held in a store, its recovery point, its answer."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from checkout.idempotency.audit import note
from checkout.idempotency.store import Held, RecordStore
from checkout.idempotency.types import (
    FINISHED,
    Complete,
    Event,
    LeaseLost,
    MoveTo,
    Scope,
    Settings,
    Step,
    StoredResponse,
)
from checkout.transactions import writing


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
