"""Claim a key, run the operation in atomic phases, store and replay the answer.

The flow, for one (customer, endpoint, key):

1. ``claim``: one ``INSERT ... ON CONFLICT DO NOTHING``. Exactly one request
   inserts the record and owns it; every other request reads what is there:
   a different fingerprint is a mismatch, a completed record is replayed, a
   live lease is a conflict, an expired or released lease is taken over by a
   compare-and-set UPDATE and the operation resumes from its recovery point.
2. The owner runs the operation as phases (``Operation.phase``): each phase
   is one transaction that first re-checks the owner token, so a worker whose
   lease was taken over cannot write anything, then moves the recovery point.
3. The last phase stores the response with ``Operation.complete``; a retry
   with the same key from then on gets it back byte for byte.

If the operation cannot know its outcome yet (a gateway outage, a lost
answer) it raises ``RetryLater``: the lease is released at once and nothing
is stored as the outcome, so the next retry resumes immediately.
"""

import hmac
import math
import secrets
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import sqlalchemy as sa

from checkout.database import insert_ignoring_conflicts, utcnow
from checkout.extensions import db
from checkout.idempotency.audit import note, record_event
from checkout.idempotency.models import COMPLETED, IN_PROGRESS, STARTED, IdempotencyRecord
from checkout.idempotency.operation import Operation
from checkout.idempotency.types import (
    Done,
    InProgress,
    LeaseLost,
    Mismatch,
    Outcome,
    RetryLater,
    Scope,
    Settings,
    StoredResponse,
    Unfinished,
)

POLL_SECONDS = 0.1
# A request in progress usually ends within seconds; a dead owner's lease is taken over
# when it expires. Either way a client should look again soon, not wait out the lease.
MAX_RETRY_AFTER = 2


def _retry_after(locked_until: datetime | None, now: datetime) -> int:
    if locked_until is None:
        return 1
    return min(MAX_RETRY_AFTER, max(1, math.ceil((locked_until - now).total_seconds())))


def _read(scope: Scope) -> IdempotencyRecord | None:
    return db.session.execute(
        sa.select(IdempotencyRecord)
        .where(
            IdempotencyRecord.customer == scope.customer,
            IdempotencyRecord.endpoint == scope.endpoint,
            IdempotencyRecord.key == scope.key,
        )
        .execution_options(populate_existing=True)
    ).scalar_one_or_none()


def stored_response(record: IdempotencyRecord) -> StoredResponse:
    assert record.response_status is not None
    return StoredResponse(
        status=record.response_status,
        headers=dict(record.response_headers or {}),
        body=record.response_body or b"",
    )


def claim(
    scope: Scope, fingerprint: str, settings: Settings, *, note_conflict: bool = True
) -> Operation | Done | InProgress | Mismatch:
    """Claim the key atomically, or say what the existing record means for this request."""
    for _attempt in range(5):
        now = utcnow()
        owner = secrets.token_hex(16)
        lease_end = now + timedelta(seconds=settings.lease_seconds)
        inserted = db.session.execute(
            insert_ignoring_conflicts(IdempotencyRecord, db.session)
            .values(
                customer=scope.customer,
                endpoint=scope.endpoint,
                key=scope.key,
                fingerprint=fingerprint,
                state=IN_PROGRESS,
                recovery_point=STARTED,
                locked_by=owner,
                locked_until=lease_end,
                created_at=now,
                updated_at=now,
                expires_at=now + timedelta(seconds=settings.lifetime_seconds),
            )
            .returning(IdempotencyRecord.id)
        ).scalar_one_or_none()
        if inserted is not None:
            note(scope, "claimed", owner=owner[:8])
            db.session.commit()
            return Operation(scope, inserted, owner, STARTED, resumed=False, settings=settings)

        record = _read(scope)
        if record is None:  # purged between our insert and our read: try again
            db.session.rollback()
            continue
        if not _same_fingerprint(record.fingerprint, fingerprint):
            note(scope, "mismatch")
            db.session.commit()
            return Mismatch()
        if record.state == COMPLETED:
            note(scope, "replayed", status=record.response_status)
            db.session.commit()
            return Done(stored_response(record), replayed=True)
        if record.locked_by is not None and record.locked_until is not None and record.locked_until > now:
            retry_after = _retry_after(record.locked_until, now)
            if note_conflict:
                note(scope, "conflict", retry_after=retry_after)
                db.session.commit()
            else:
                db.session.rollback()
            return InProgress(retry_after)
        # The lease expired (a crashed worker) or was released (an unknown outcome):
        # take it over with a compare-and-set, so only one retry resumes.
        operation = take_over(record, settings, now=now)
        if operation is not None:
            return operation
        # somebody else took it over first: look again
    return InProgress(retry_after=1)


def take_over(
    record: IdempotencyRecord, settings: Settings, *, now: datetime | None = None, by: str = "resumed"
) -> Operation | None:
    """Take an expired or released lease with a compare-and-set UPDATE (None if someone else won).

    The UPDATE only matches while the lease is still free, so of two racing
    retries exactly one gets a row count of 1. On PostgreSQL the loser waits
    for the winner's row lock, re-reads the row and no longer matches.
    """
    now = now or utcnow()
    owner = secrets.token_hex(16)
    taken = db.session.execute(
        sa.update(IdempotencyRecord)
        .where(
            IdempotencyRecord.id == record.id,
            IdempotencyRecord.state == IN_PROGRESS,
            sa.or_(IdempotencyRecord.locked_by.is_(None), IdempotencyRecord.locked_until < now),
        )
        .values(locked_by=owner, locked_until=now + timedelta(seconds=settings.lease_seconds), updated_at=now)
        .execution_options(synchronize_session=False)
    )
    scope = Scope(record.customer, record.endpoint, record.key)
    if taken.rowcount != 1:
        db.session.rollback()
        return None
    note(scope, by, recovery_point=record.recovery_point, owner=owner[:8])
    db.session.commit()
    return Operation(scope, record.id, owner, record.recovery_point, resumed=True, settings=settings)


def abandoned(settings: Settings, *, now: datetime | None = None) -> list[IdempotencyRecord]:
    """In-progress records nobody is working on: the lease expired, or was released a lease ago."""
    now = now or utcnow()
    quiet_since = now - timedelta(seconds=settings.lease_seconds)
    records = db.session.scalars(
        sa.select(IdempotencyRecord)
        .where(
            IdempotencyRecord.state == IN_PROGRESS,
            sa.or_(
                IdempotencyRecord.locked_until < now,
                sa.and_(IdempotencyRecord.locked_by.is_(None), IdempotencyRecord.updated_at < quiet_since),
            ),
        )
        .order_by(IdempotencyRecord.id)
    ).all()
    db.session.commit()
    return list(records)


def _same_fingerprint(stored: str, offered: str) -> bool:
    return hmac.compare_digest(stored, offered)


def execute(
    scope: Scope,
    fingerprint: str,
    action: Callable[[Operation], None],
    *,
    settings: Settings,
    wait_seconds: float = 0.0,
) -> Outcome:
    """Run ``action`` at most once for this scope, whatever the retries and races.

    ``action`` receives the ``Operation`` and must end with
    ``operation.complete(response)`` inside its last phase. A request that
    finds the key in progress waits up to ``wait_seconds`` for the owner to
    finish (browsers), or returns ``InProgress`` at once (API clients).
    """
    record_event(scope, "received")
    deadline = time.monotonic() + wait_seconds
    claimed = claim(scope, fingerprint, settings)
    while isinstance(claimed, InProgress) and time.monotonic() < deadline:
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        claimed = claim(scope, fingerprint, settings, note_conflict=False)
    if not isinstance(claimed, Operation):
        return claimed

    operation = claimed
    try:
        action(operation)
    except RetryLater as exc:
        operation.release(exc.reason, exc.event, **exc.detail)
        return Unfinished(retry_after=exc.retry_after, reason=exc.reason)
    except LeaseLost:
        db.session.rollback()
        record_event(scope, "lease_lost")
        return InProgress(retry_after=1)
    except BaseException:
        operation.release("error")
        raise
    if operation.response is None:
        operation.release("no response")
        raise RuntimeError("the operation ended without storing a response")
    return Done(operation.response, replayed=False)


def peek(scope: Scope) -> IdempotencyRecord | None:
    """The record for a scope, read without claiming anything."""
    record = _read(scope)
    db.session.commit()  # ends the read; commit (unlike rollback) leaves the object loaded
    return record


def purge(now: datetime | None = None) -> int:
    """Delete completed records past their lifetime; never an unfinished one."""
    now = now or utcnow()
    result = db.session.execute(
        sa.delete(IdempotencyRecord)
        .where(IdempotencyRecord.state == COMPLETED, IdempotencyRecord.expires_at < now)
        .execution_options(synchronize_session=False)
    )
    db.session.commit()
    return result.rowcount or 0
