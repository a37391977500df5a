"""The audit trail: every step of every operation, with the worker that took it.

Events are added to the unit of work that is open anyway (the claim, a
phase, the release): they commit with the change they describe, or vanish
with it. SQLAlchemy sends the events of one transaction in one INSERT.
"""

from __future__ import annotations

import enum
import os
import socket
from typing import Any

from checkout.extensions import db
from checkout.idempotency.models import IdempotencyEvent
from checkout.idempotency.types import Scope


def worker_name() -> str:
    """host:pid of this process (read each time: gunicorn forks workers after import)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def note(scope: Scope, event: enum.StrEnum, **detail: Any) -> None:
    """Add an audit event to the current unit of work."""
    db.session.add(
        IdempotencyEvent(
            customer=scope.customer,
            endpoint=scope.endpoint,
            key=scope.key,
            name=str(event),
            worker=worker_name(),
            detail={k: v for k, v in detail.items() if v is not None},
        )
    )
