"""The audit trail: every step of every operation, with the worker that took it."""
from __future__ import annotations

import os
import socket
from typing import Any

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
