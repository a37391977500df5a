"""The right to run one operation: owner-checked transactions, recovery points, the stored answer."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from checkout.database import table_of, utcnow
from checkout.extensions import db
from checkout.idempotency.audit import note, worker_name
from checkout.idempotency.models import IdempotencyRecord
from checkout.idempotency.types import (
    COMPLETED,
    FINISHED,
    IN_PROGRESS,
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

records = table_of(IdempotencyRecord)

# Built once: the columns to SET come with each execution's parameters.
_OWNED_UPDATE = (
    sa.update(records)
    .where(
        records.c.id == sa.bindparam("_id"),
        records.c.locked_by == sa.bindparam("_owner"),
        records.c.state == IN_PROGRESS,
    )
    .returning(records.c.duplicates)
)


class Operation:
    """The right to run one operation, as long as our owner token holds."""

    def __init__(
        self, scope: Scope, record_id: int, owner: str, recovery_point: str, *, resumed: bool, settings: Settings
    ) -> None:
        self.scope = scope
        self.record_id = record_id
        self.owner = owner
        self.recovery_point = recovery_point
        self.resumed = resumed
        self.settings = settings
        self.reference: str | None = None
        self.duplicates = 0
        self.response: StoredResponse | None = None  # set once the operation completes
        self._checked = False  # whether the current unit of work has checked our lease yet

    def _owned_update(self, **values: Any) -> Any:
        """UPDATE our record, only while we own it; returns the row's duplicates count."""
        row = db.session.execute(
            _OWNED_UPDATE, {"_id": self.record_id, "_owner": self.owner, "updated_at": utcnow(), **values}
        ).first()
        if row is None:
            raise LeaseLost(f"operation {self.scope.key!r} is no longer ours")
        self._checked = True
        return row[0]

    def renew_lease(self) -> None:
        self._owned_update(locked_until=utcnow() + timedelta(seconds=self.settings.lease_seconds))

    @contextmanager
    def owned(self) -> Iterator[None]:
        """One unit of work that ends with an owner-checked UPDATE of our record.

        The block must end the phase with ``apply`` (or it renews the lease),
        whose UPDATE matches only while our owner token holds. If another
        worker took the operation over meanwhile, it raises LeaseLost and the
        whole transaction rolls back: nothing a lost owner wrote survives.
        (On PostgreSQL every phase locks the rows it changes before the record
        row, and a takeover locks only the record row: no lock cycle.)
        """
        self._checked = False
        with writing():
            yield
            if not self._checked:
                self.renew_lease()

    def apply(self, step: Step) -> None:
        """End a phase, inside its transaction: move the recovery point (renewing the lease), or store the answer."""
        if isinstance(step, MoveTo):
            self._owned_update(
                recovery_point=step.recovery_point,
                reference=self.reference,
                locked_until=utcnow() + timedelta(seconds=self.settings.lease_seconds),
            )
            self.recovery_point = step.recovery_point
        elif isinstance(step, Complete):
            self._store(step.response)
        else:
            raise TypeError(f"a phase must end with MoveTo or Complete, not {step!r}")

    def _store(self, response: StoredResponse) -> None:
        now = utcnow()
        self.duplicates = self._owned_update(
            state=COMPLETED,
            recovery_point=FINISHED,
            reference=self.reference,
            response_status=response.status,
            response_headers=dict(response.headers),
            response_body=response.body,
            completed_at=now,
            locked_by=None,
            locked_until=None,
            worker=None,
        )
        note(self.scope, Event.COMPLETED, status=response.status)
        self.recovery_point = FINISHED
        self.response = response

    def note(self, event: enum.StrEnum, **detail: Any) -> None:
        note(self.scope, event, **detail)

    def release(self, reason: str, event: enum.StrEnum | None = None, **detail: Any) -> None:
        """Give the lease back without an outcome, so a retry resumes at once (in its own transaction).

        ``event`` (what went wrong, e.g. answer_lost) is recorded with the release.
        """
        with writing():
            try:
                self._owned_update(locked_by=None, locked_until=None, worker=None)
                released = True
            except LeaseLost:
                released = False  # the new owner holds the lease; only the audit is ours to write
            if event:
                note(self.scope, event, **detail)
            if released:
                note(self.scope, Event.RELEASED, reason=reason, recovery_point=self.recovery_point)

    def discard(self, reason: str) -> None:
        """Delete the record (nothing happened under it), so the next retry starts afresh."""
        with writing() as session:
            deleted = session.execute(
                sa.delete(records)
                .where(records.c.id == self.record_id, records.c.locked_by == self.owner)
                .returning(records.c.id)
            ).first()
            if deleted is None:
                raise LeaseLost(f"operation {self.scope.key!r} is no longer ours")
            note(self.scope, Event.DISCARDED, reason=reason)


def lease_values(owner: str, settings: Settings) -> dict[str, Any]:
    """The columns of a fresh lease held by this worker."""
    return {
        "locked_by": owner,
        "worker": worker_name(),
        "locked_until": utcnow() + timedelta(seconds=settings.lease_seconds),
    }
