"""The audit trail: every step of every operation, with the worker that took it."""

from __future__ import annotations

import os
import socket
from typing import Any

import sqlalchemy as sa

from checkout.extensions import db
from checkout.idempotency.models import IdempotencyEvent
from checkout.idempotency.types import Scope

WORKER = f"{socket.gethostname()}:{os.getpid()}"


def note(scope: Scope, name: str, **detail: Any) -> None:
    """Add an audit event to the current transaction (the caller commits)."""
    db.session.add(
        IdempotencyEvent(
            customer=scope.customer,
            endpoint=scope.endpoint,
            key=scope.key,
            name=name,
            worker=WORKER,
            detail={k: v for k, v in detail.items() if v is not None},
        )
    )


def record_event(scope: Scope, name: str, **detail: Any) -> None:
    """Write one audit event in its own transaction."""
    note(scope, name, **detail)
    db.session.commit()


def had_duplicates(scope: Scope) -> bool:
    """Whether another request with this key arrived while the operation was in progress."""
    found = db.session.scalar(
        sa.select(IdempotencyEvent.id)
        .where(
            IdempotencyEvent.customer == scope.customer,
            IdempotencyEvent.endpoint == scope.endpoint,
            IdempotencyEvent.key == scope.key,
            IdempotencyEvent.name == "conflict",
        )
        .limit(1)
    )
    db.session.commit()
    return found is not None
