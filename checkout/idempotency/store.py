"""Where the records live. The RecordStore port: what the engine needs from a store (an app may bring its own,
Redis say); a store keeps one record per scope, changed only by its lease holder. Then SqlStore, the records in
the app's own database: the store whose writes join the unit of work of the phase they end.

The SQL claim is one ``INSERT ... ON CONFLICT DO NOTHING`` against the unique (customer, endpoint, key): of two
racing requests, the index picks one. Every later write is an ``UPDATE ... WHERE locked_by = <our token>
RETURNING``, in the transaction of the phase it ends, so a worker whose lease was taken over writes nothing at all.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import sqlalchemy as sa

from .outcomes import LeaseLost
from .signals import app, purged
from .types import COMPLETED, FINISHED, IN_PROGRESS, STARTED, Complete, MoveTo, RecordView, Scope, Settings
from .types import StoredResponse as Stored
from .units import insert_ignoring_conflicts, session, utcnow, writing


def worker_name() -> str:
    """host:pid of this process, which a lease names (read each time: gunicorn forks its workers after import)."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Held:
    """A record this worker holds: what the store checks a write against."""

    id: int | str
    owner: str  # this worker's random token: a write matches only while it is the record's
    recovery_point: str
    reference: str | None = None
    version: str | None = None  # a store that compares whole values (Redis) keeps the last one written


class RecordStore(Protocol):
    """Records of operations, one per scope.

    ``joins_transaction``: its claim and steps are written in the unit of work of the phase they end (a store in
    the app's database), or around it (a store outside, such as Redis). The engine picks its seam by it, once.
    """

    name: str
    joins_transaction: bool

    def find(self, scope: Scope) -> RecordView | None:
        """The scope's record, read without claiming anything."""

    def claim(self, scope: Scope, fingerprint: str, owner: str, settings: Settings) -> Held | None:
        """Create the record, held by ``owner``, in one atomic step; None if the scope has one already."""

    def take_over(self, record: RecordView, owner: str, settings: Settings) -> Held | None:
        """Hold an in-progress record whose lease is free (expired or released); None if another won."""

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        """Move the recovery point (renewing the lease) or store the answer, only while ``held`` is ours: how many
        duplicates the record has counted; LeaseLost when it is not ours."""

    def release(self, held: Held) -> bool:
        """Give the lease back with no outcome; False if it was no longer ours."""

    def discard(self, held: Held) -> bool:
        """Delete the record (nothing happened under it); False if it was no longer ours."""

    def count_duplicate(self, record: RecordView) -> None:
        """Count a request that arrived while the record's lease was live."""


class NoStore:
    """No store at all: a pipeline over ``NO_STORE`` reads no key and keeps nothing, so every request runs the
    whole operation again (the mistake a lab shows before the fix)."""

    name = "none"
    joins_transaction = True

    def find(self, scope: Scope) -> RecordView | None:
        return None

    def claim(self, scope: Scope, fingerprint: str, owner: str, settings: Settings) -> Held | None:
        return Held(0, owner, STARTED)

    def take_over(self, record: RecordView, owner: str, settings: Settings) -> Held | None:
        return None

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        return 0

    def release(self, held: Held) -> bool:
        return True

    def discard(self, held: Held) -> bool:
        return True

    def count_duplicate(self, record: RecordView) -> None:
        return None


NO_STORE = NoStore()


# --- the records in the app's own database ------------------------------------------------------------


def view_of(row: Any, now: datetime) -> RecordView:
    """The read model of a record's row (a Core row: no ORM object crosses into a caller)."""
    answer = Stored(row.response_status, dict(row.response_headers or {}), row.response_body or b"")
    live = row.locked_by is not None and row.locked_until is not None and row.locked_until > now
    scope = Scope(row.customer, row.endpoint, row.key)
    return RecordView(
        row.id, scope, row.fingerprint, row.state, row.recovery_point, live, row.worker if live else None,
        row.locked_until, row.reference, answer if row.response_status is not None else None, row.duplicates,
        row.created_at, row.updated_at,
    )  # fmt: skip


def _lease(owner: str | None, settings: Settings) -> dict[str, Any]:
    """The columns of a lease held by ``owner`` in this worker, or of none."""
    until = utcnow() + timedelta(seconds=settings.lease_seconds) if owner else None
    return {"locked_by": owner, "worker": worker_name() if owner else None, "locked_until": until}


class SqlStore:
    """Records in ``table`` (models.record_table), written in the transaction of the phase they end."""

    name = "sql"
    joins_transaction = True

    def __init__(self, table: sa.Table) -> None:
        self.records, c = table, table.c
        # The statements every request runs, built once (executed with parameters).
        key = (c.customer == sa.bindparam("_c"), c.endpoint == sa.bindparam("_e"), c.key == sa.bindparam("_k"))
        self._find = sa.select(table).where(*key)
        ours = (c.id == sa.bindparam("_id"), c.locked_by == sa.bindparam("_owner"), c.state == IN_PROGRESS)
        self._owned = sa.update(table).where(*ours).returning(c.duplicates)

    def view(self, row: Any) -> RecordView:
        """The read model of one of its rows, read elsewhere."""
        return view_of(row, utcnow())

    def find(self, scope: Scope) -> RecordView | None:
        row = session().execute(self._find, {"_c": scope.customer, "_e": scope.endpoint, "_k": scope.key}).first()
        return view_of(row, utcnow()) if row is not None else None

    def claim(self, scope: Scope, fingerprint: str, owner: str, settings: Settings) -> Held | None:
        now, current, c = utcnow(), session(), self.records.c
        values: dict[str, Any] = {"customer": scope.customer, "endpoint": scope.endpoint, "key": scope.key}
        values |= {"fingerprint": fingerprint, "state": IN_PROGRESS, "recovery_point": STARTED, "duplicates": 0}
        expires = now + timedelta(seconds=settings.lifetime_seconds)
        values |= {"created_at": now, "updated_at": now, "expires_at": expires, **_lease(owner, settings)}
        claim = insert_ignoring_conflicts(self.records, current, returning=(c.id,))
        record_id = current.execute(claim, values).scalar_one_or_none()
        return Held(record_id, owner, STARTED) if record_id is not None else None

    def take_over(self, record: RecordView, owner: str, settings: Settings) -> Held | None:
        # Matches only while the lease is still free: of two racing retries exactly one changes the row.
        # On PostgreSQL the loser waits for the winner's row lock, re-reads the row and no longer matches.
        now, c = utcnow(), self.records.c
        free = (c.id == record.id, c.state == IN_PROGRESS, sa.or_(c.locked_by.is_(None), c.locked_until < now))
        take = sa.update(self.records).where(*free).values(updated_at=now, **_lease(owner, settings))
        taken = session().execute(take.returning(c.recovery_point, c.reference)).first()
        return Held(record.id, owner, taken.recovery_point, taken.reference) if taken is not None else None

    def _owned_update(self, held: Held, **values: Any) -> int:
        row = session().execute(self._owned, {"_id": held.id, "_owner": held.owner, "updated_at": utcnow(), **values})
        found = row.first()
        if found is None:
            raise LeaseLost(f"record {held.id} is no longer ours")
        return int(found[0])

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        if isinstance(step, MoveTo):
            until = utcnow() + timedelta(seconds=settings.lease_seconds)
            return self._owned_update(
                held, recovery_point=step.recovery_point, reference=held.reference, locked_until=until
            )
        answer = step.response
        stored = {
            "response_status": answer.status,
            "response_headers": dict(answer.headers),
            "response_body": answer.body,
        }
        done = {"state": COMPLETED, "recovery_point": FINISHED, "completed_at": utcnow(), **_lease(None, settings)}
        return self._owned_update(held, reference=held.reference, **stored, **done)

    def release(self, held: Held) -> bool:
        try:
            self._owned_update(held, locked_by=None, locked_until=None, worker=None)
        except LeaseLost:
            return False
        return True

    def discard(self, held: Held) -> bool:
        c = self.records.c
        gone = sa.delete(self.records).where(c.id == held.id, c.locked_by == held.owner).returning(c.id)
        return session().execute(gone).first() is not None

    def count_duplicate(self, record: RecordView) -> None:
        c = self.records.c
        session().execute(sa.update(self.records).where(c.id == record.id).values(duplicates=c.duplicates + 1))

    # --- housekeeping: only this store keeps records past their answer ------------------------------------------

    def abandoned(self, settings: Settings, *, now: datetime | None = None) -> list[RecordView]:
        """In-progress records nobody is working on: the lease expired, or was released a lease ago."""
        now, c = now or utcnow(), self.records.c
        released_long_ago = sa.and_(
            c.locked_by.is_(None), c.updated_at < now - timedelta(seconds=settings.lease_seconds)
        )
        stale = sa.select(self.records).where(c.state == IN_PROGRESS, sa.or_(c.locked_until < now, released_long_ago))
        return [view_of(row, now) for row in session().execute(stale.order_by(c.id)).all()]

    def purge(self, batch: int = 5000, *, expired_by: datetime | None = None, customer: str | None = None) -> int:
        """Delete completed records (``customer``'s, else everyone's) past their lifetime (or by ``expired_by``).

        Never an unfinished record (reconcile finishes those). In batches of one short transaction: a backlog neither
        outlives a statement timeout nor holds a late retry's locks. ``purged`` tells which scopes went, in the unit.
        """
        c, removed = self.records.c, 0
        whose = c.customer == customer if customer is not None else sa.true()
        expired = sa.select(c.id, c.customer, c.endpoint, c.key).where(
            c.state == COMPLETED, c.expires_at < (expired_by or utcnow()), whose
        )
        while True:
            with writing() as current:
                rows = current.execute(expired.order_by(c.id).limit(batch)).all()
                if rows:
                    purged.send(app(), scopes=[Scope(row.customer, row.endpoint, row.key) for row in rows])
                    current.execute(sa.delete(self.records).where(c.id.in_([row.id for row in rows])))
            removed += len(rows)
            if len(rows) < batch:
                return removed
