"""The right to run one operation: owner-checked transactions, recovery points, the stored answer."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from checkout.database import utcnow
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

    def _owned_update(self, **values: Any) -> Any:
        """UPDATE our record, only while we own it; returns the row's duplicates count."""
        now = utcnow()
        row = db.session.execute(
            sa.update(IdempotencyRecord)
            .where(
                IdempotencyRecord.id == self.record_id,
                IdempotencyRecord.locked_by == self.owner,
                IdempotencyRecord.state == IN_PROGRESS,
            )
            .values(updated_at=now, **values)
            .returning(IdempotencyRecord.duplicates)
            .execution_options(synchronize_session=False)
        ).first()
        if row is None:
            raise LeaseLost(f"operation {self.scope.key!r} is no longer ours")
        return row[0]

    def renew_lease(self) -> None:
        self._owned_update(locked_until=utcnow() + timedelta(seconds=self.settings.lease_seconds))

    @contextmanager
    def owned(self) -> Iterator[None]:
        """One unit of work that first checks, and renews, our lease.

        The check comes first, so on PostgreSQL it also locks the row: a
        takeover waits for this transaction, then finds the lease renewed;
        and a worker whose lease was taken over writes nothing at all.
        """
        with writing():
            self.renew_lease()
            yield

    def apply(self, step: Step) -> None:
        """End a phase, inside its transaction: move the recovery point, or store the answer."""
        if isinstance(step, MoveTo):
            self._owned_update(recovery_point=step.recovery_point, reference=self.reference)
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
                sa.delete(IdempotencyRecord)
                .where(IdempotencyRecord.id == self.record_id, IdempotencyRecord.locked_by == self.owner)
                .returning(IdempotencyRecord.id)
                .execution_options(synchronize_session=False)
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
