"""The audit trail: every step of every operation, with the worker that took it.

Events are written in the unit of work they describe (one INSERT, just before it commits); ``on_committed``
subscribers (metrics, logs) hear only committed ones. Each carries its HTTP request's tag.
Design: docs/design.md#checkoutidempotencyauditpy-the-audit-trail
"""

from __future__ import annotations

import enum
import os
import secrets
import socket
from collections.abc import Callable, Sequence
from typing import Any

from flask import has_request_context
from flask import request as http_request
from sqlalchemy import event, insert
from sqlalchemy.orm import Session

from checkout.database import table_of, utcnow
from checkout.extensions import db
from checkout.idempotency.models import IdempotencyEvent
from checkout.idempotency.types import Scope

_PENDING = "checkout.audit"
_COMMITTING = "checkout.audit.committing"

AuditEvent = dict[str, Any]  # created_at, customer, endpoint, key, name, worker, detail
_subscribers: list[Callable[[Sequence[AuditEvent]], None]] = []


def on_committed(subscriber: Callable[[Sequence[AuditEvent]], None]) -> None:
    """Call ``subscriber`` with the events of every unit of work that commits (after it has)."""
    if subscriber not in _subscribers:
        _subscribers.append(subscriber)


def worker_name() -> str:
    """host:pid of this process (read each time: gunicorn forks workers after import)."""
    return f"{socket.gethostname()}:{os.getpid()}"


REQUEST_TAG = "request"  # the detail naming the HTTP request that took a step
_ENVIRON_TAG = "checkout.audit.request"


def request_tag() -> str | None:
    """The tag of the HTTP request being served, made at its first event (None outside a request)."""
    if not has_request_context():
        return None
    environ = http_request.environ
    tag = environ.get(_ENVIRON_TAG)
    if tag is None:
        tag = environ[_ENVIRON_TAG] = secrets.token_hex(6)
    return str(tag)


def note(scope: Scope, name: enum.StrEnum, **detail: Any) -> None:
    """Add an audit event to the current unit of work (tagged with the HTTP request, if there is one).

    A request with no key (the lab's unsafe twins) has no trail: the trail is kept per key.
    """
    if not scope.key:
        return
    detail.setdefault(REQUEST_TAG, request_tag())
    session = db.session()
    session.info.setdefault(_PENDING, []).append(
        {
            "created_at": utcnow(),
            "customer": scope.customer,
            "endpoint": scope.endpoint,
            "key": scope.key,
            "name": str(name),
            "worker": worker_name(),
            "detail": {k: v for k, v in detail.items() if v is not None},
        }
    )


@event.listens_for(Session, "before_commit")
def _write_pending_events(session: Session) -> None:
    pending = session.info.pop(_PENDING, None)
    if pending:
        session.execute(insert(table_of(IdempotencyEvent)), pending)
        session.info[_COMMITTING] = pending


@event.listens_for(Session, "after_commit")
def _tell_subscribers(session: Session) -> None:
    committed = session.info.pop(_COMMITTING, None)
    if committed:
        for subscriber in _subscribers:
            subscriber(committed)


@event.listens_for(Session, "after_rollback")
def _forget_pending_events(session: Session) -> None:
    session.info.pop(_PENDING, None)
    session.info.pop(_COMMITTING, None)
