"""The right to run one operation: owner-checked phases, recovery points, the stored answer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from checkout.database import utcnow
from checkout.extensions import db
from checkout.idempotency.audit import note
from checkout.idempotency.models import COMPLETED, FINISHED, IN_PROGRESS, IdempotencyRecord
from checkout.idempotency.types import LeaseLost, Scope, Settings, StoredResponse


class Operation:
    """The right to run one operation, as long as our owner token holds."""

    def __init__(
        self, scope: Scope, record_id: int, owner: str, recovery_point: str, resumed: bool, settings: Settings
    ) -> None:
        self.scope = scope
        self.record_id = record_id
        self.owner = owner
        self.recovery_point = recovery_point
        self.resumed = resumed
        self.settings = settings
        self.response: StoredResponse | None = None
        self._pending: tuple[str, StoredResponse | None] | None = None

    def _owned_update(self, **values: Any) -> None:
        now = utcnow()
        values.setdefault("locked_until", now + timedelta(seconds=self.settings.lease_seconds))
        result = db.session.execute(
            sa.update(IdempotencyRecord)
            .where(
                IdempotencyRecord.id == self.record_id,
                IdempotencyRecord.locked_by == self.owner,
                IdempotencyRecord.state == IN_PROGRESS,
            )
            .values(updated_at=now, **values)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:
            raise LeaseLost(f"operation {self.scope.key!r} is no longer ours")

    @contextmanager
    def phase(self) -> Iterator[Operation]:
        """One atomic phase: check we still own the record, run the caller's writes, commit.

        The owner check comes first, so on PostgreSQL it also locks the row:
        a takeover waits for this phase, then finds the lease renewed.
        """
        try:
            self._owned_update()
            yield self
            db.session.commit()
        except BaseException:
            db.session.rollback()
            self._pending = None
            raise
        if self._pending is not None:
            self.recovery_point, response = self._pending
            if response is not None:
                self.response = response
            self._pending = None

    def checkpoint(self, recovery_point: str) -> None:
        """Move the recovery point, inside the current phase."""
        self._owned_update(recovery_point=recovery_point)
        self._pending = (recovery_point, None)

    def complete(self, response: StoredResponse) -> None:
        """Store the final answer, inside the current phase, and give up the lease."""
        now = utcnow()
        self._owned_update(
            state=COMPLETED,
            recovery_point=FINISHED,
            response_status=response.status,
            response_headers=dict(response.headers),
            response_body=response.body,
            completed_at=now,
            locked_by=None,
            locked_until=None,
        )
        note(self.scope, "completed", status=response.status)
        self._pending = (FINISHED, response)

    def note(self, name: str, **detail: Any) -> None:
        note(self.scope, name, **detail)

    def discard(self, reason: str) -> None:
        """Delete the record (nothing happened yet under it), so the next retry starts afresh."""
        db.session.rollback()
        result = db.session.execute(
            sa.delete(IdempotencyRecord)
            .where(IdempotencyRecord.id == self.record_id, IdempotencyRecord.locked_by == self.owner)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:
            db.session.rollback()
            raise LeaseLost(f"operation {self.scope.key!r} is no longer ours")
        note(self.scope, "discarded", reason=reason)
        db.session.commit()

    def release(self, reason: str, event: str | None = None, **detail: Any) -> None:
        """Give the lease back without an outcome, so a retry resumes at once.

        ``event`` (what went wrong, e.g. "answer_lost") is recorded with the release.
        """
        db.session.rollback()
        try:
            self._owned_update(locked_by=None, locked_until=None)
            released = True
        except LeaseLost:
            db.session.rollback()  # the new owner holds the lease; only the audit is ours to write
            released = False
        if event:
            note(self.scope, event, **detail)
        if released:
            note(self.scope, "released", reason=reason, recovery_point=self.recovery_point)
        db.session.commit()
