"""The shop's record store: ``idempotency_records`` in the order's own database.

The claim is one ``INSERT ... ON CONFLICT DO NOTHING`` against the unique
(customer, endpoint, key): of two racing requests, the index picks one. Every
later write is an ``UPDATE ... WHERE locked_by = <our token> RETURNING``, in
the transaction of the phase it ends, so a worker whose lease was taken over
writes nothing at all: its whole transaction rolls back.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from checkout.database import insert_ignoring_conflicts, table_of, utcnow, writing
from checkout.extensions import db
from checkout.idempotency.audit import worker_name
from checkout.idempotency.models import IdempotencyEvent, IdempotencyRecord
from checkout.idempotency.store import Held
from checkout.idempotency.types import (
    COMPLETED,
    FINISHED,
    IN_PROGRESS,
    STARTED,
    Complete,
    LeaseLost,
    MoveTo,
    RecordView,
    Scope,
    Settings,
    StoredResponse,
)

events = table_of(IdempotencyEvent)


def view_of(record: Any, now: datetime) -> RecordView:
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


def _lease(owner: str | None, settings: Settings) -> dict[str, Any]:
    """The columns of a lease held by ``owner`` in this worker, or of none."""
    if owner is None:
        return {"locked_by": None, "locked_until": None, "worker": None}
    return {
        "locked_by": owner,
        "worker": worker_name(),
        "locked_until": utcnow() + timedelta(seconds=settings.lease_seconds),
    }


class SqlStore:
    """Records in ``idempotency_records`` (or a table of the same columns), written in the transaction
    of the phase they end."""

    name = "sql"
    joins_transaction = True

    def __init__(self, table: sa.Table | None = None) -> None:
        self.records = table if table is not None else table_of(IdempotencyRecord)
        # The statements every request runs, built once (executed with parameters).
        self._find = sa.select(self.records).where(
            self.records.c.customer == sa.bindparam("_customer"),
            self.records.c.endpoint == sa.bindparam("_endpoint"),
            self.records.c.key == sa.bindparam("_key"),
        )
        self._owned = (
            sa.update(self.records)
            .where(
                self.records.c.id == sa.bindparam("_id"),
                self.records.c.locked_by == sa.bindparam("_owner"),
                self.records.c.state == IN_PROGRESS,
            )
            .returning(self.records.c.duplicates)
        )

    def find(self, scope: Scope) -> RecordView | None:
        record = db.session.execute(
            self._find, {"_customer": scope.customer, "_endpoint": scope.endpoint, "_key": scope.key}
        ).first()
        return view_of(record, utcnow()) if record is not None else None

    def claim(self, scope: Scope, fingerprint: str, owner: str, settings: Settings) -> Held | None:
        now = utcnow()
        session = db.session()
        record_id = session.execute(
            insert_ignoring_conflicts(self.records, session, returning=(self.records.c.id,)),
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
                **_lease(owner, settings),
            },
        ).scalar_one_or_none()
        return Held(record_id, owner, STARTED) if record_id is not None else None

    def take_over(self, record: RecordView, owner: str, settings: Settings) -> Held | None:
        # Matches only while the lease is still free: of two racing retries exactly one changes the row.
        # On PostgreSQL the loser waits for the winner's row lock, re-reads the row and no longer matches.
        now = utcnow()
        taken = db.session.execute(
            sa.update(self.records)
            .where(
                self.records.c.id == record.id,
                self.records.c.state == IN_PROGRESS,
                sa.or_(self.records.c.locked_by.is_(None), self.records.c.locked_until < now),
            )
            .values(updated_at=now, **_lease(owner, settings))
            .returning(self.records.c.recovery_point, self.records.c.reference)
        ).first()
        return Held(record.id, owner, taken.recovery_point, taken.reference) if taken is not None else None

    def _owned_update(self, held: Held, **values: Any) -> int:
        row = db.session.execute(
            self._owned, {"_id": held.id, "_owner": held.owner, "updated_at": utcnow(), **values}
        ).first()
        if row is None:
            raise LeaseLost(f"record {held.id} is no longer ours")
        return int(row[0])

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        if isinstance(step, MoveTo):
            return self._owned_update(
                held,
                recovery_point=step.recovery_point,
                reference=held.reference,
                locked_until=utcnow() + timedelta(seconds=settings.lease_seconds),
            )
        return self._owned_update(
            held,
            state=COMPLETED,
            recovery_point=FINISHED,
            reference=held.reference,
            response_status=step.response.status,
            response_headers=dict(step.response.headers),
            response_body=step.response.body,
            completed_at=utcnow(),
            **_lease(None, settings),
        )

    def release(self, held: Held) -> bool:
        try:
            self._owned_update(held, locked_by=None, locked_until=None, worker=None)
        except LeaseLost:
            return False
        return True

    def discard(self, held: Held) -> bool:
        deleted = db.session.execute(
            sa.delete(self.records)
            .where(self.records.c.id == held.id, self.records.c.locked_by == held.owner)
            .returning(self.records.c.id)
        ).first()
        return deleted is not None

    def count_duplicate(self, record: RecordView) -> None:
        db.session.execute(
            sa.update(self.records)
            .where(self.records.c.id == record.id)
            .values(duplicates=self.records.c.duplicates + 1)
        )

    # --- housekeeping: only this store keeps records past their answer --------------------

    def abandoned(self, settings: Settings, *, now: datetime | None = None) -> list[RecordView]:
        """In-progress records nobody is working on: the lease expired, or was released a lease ago."""
        now = now or utcnow()
        quiet_since = now - timedelta(seconds=settings.lease_seconds)
        stale = db.session.execute(
            sa.select(self.records)
            .where(
                self.records.c.state == IN_PROGRESS,
                sa.or_(
                    self.records.c.locked_until < now,
                    sa.and_(self.records.c.locked_by.is_(None), self.records.c.updated_at < quiet_since),
                ),
            )
            .order_by(self.records.c.id)
        ).all()
        return [view_of(record, now) for record in stale]

    def purge(
        self, settings: Settings, now: datetime | None = None, batch: int = 5000, *, expired_by: datetime | None = None
    ) -> int:
        """Delete completed records past their lifetime with their audit events, and events past it.

        Never an unfinished record: reconcile finishes those first. In batches of ``batch`` rows,
        one short transaction each, so a large backlog neither outlives the statement timeout nor
        holds the locks a late retry of those keys waits for. ``expired_by`` (the lab's purge) takes the
        completed records that will have expired by then; the other events still age from ``now``.
        """
        now = now or utcnow()
        expired_by = expired_by or now
        removed = 0
        while True:
            with writing() as session:
                expired = session.execute(
                    sa.select(self.records.c.id, self.records.c.customer, self.records.c.endpoint, self.records.c.key)
                    .where(self.records.c.state == COMPLETED, self.records.c.expires_at < expired_by)
                    .order_by(self.records.c.id)
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
                    session.execute(sa.delete(self.records).where(self.records.c.id.in_([row.id for row in expired])))
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


SQL_STORE = SqlStore()
