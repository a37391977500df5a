"""The audit trail: every step of every operation, with the worker that took it (the engine's ``noted`` signal).

Events are written in the unit of work they describe (one INSERT, just before it commits); ``on_committed``
subscribers (metrics, the lab, and the JSON log line of each event) hear only committed ones. Each carries its HTTP
request's tag. A log line never holds a card number: nothing the engine records holds one, and ``scrub`` redacts
anything that can be one anyway.
Design: docs/design.md#checkoutauditpy-the-audit-trail
"""

from __future__ import annotations

import enum
import json
import logging
import re
import secrets
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

import sqlalchemy as sa
from flask import Flask, has_request_context
from flask import request as http_request
from sqlalchemy import event, insert
from sqlalchemy.orm import Mapped, Session, mapped_column

from checkout.database import Base, BigId, UTCDateTime, table_of, utcnow, writing
from checkout.extensions import db, once
from checkout.idempotency import Event, Scope
from checkout.idempotency.signals import noted, purged
from checkout.idempotency.store import worker_name


class IdempotencyRecord(Base):
    """The engine's record table (``once.records``), mapped for the lab's pages and the tests (typed here only)."""

    __table__ = once.records
    id: Mapped[int]
    customer: Mapped[str]
    endpoint: Mapped[str]
    key: Mapped[str]
    fingerprint: Mapped[str]
    state: Mapped[str]
    recovery_point: Mapped[str]
    locked_by: Mapped[str | None]
    worker: Mapped[str | None]
    locked_until: Mapped[datetime | None]
    reference: Mapped[str | None]
    duplicates: Mapped[int]
    response_status: Mapped[int | None]
    response_headers: Mapped[dict[str, str] | None]
    response_body: Mapped[bytes | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    completed_at: Mapped[datetime | None]
    expires_at: Mapped[datetime]


class IdempotencyEvent(Base):
    """One step of one operation, for support and for the lab timeline."""

    __tablename__ = "idempotency_events"
    __table_args__ = (
        sa.Index("ix_idempotency_events_scope", "customer", "endpoint", "key"),
        sa.Index("ix_idempotency_events_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    customer: Mapped[str] = mapped_column(sa.String(64))
    endpoint: Mapped[str] = mapped_column(sa.String(100))
    key: Mapped[str] = mapped_column(sa.String(255))
    name: Mapped[str] = mapped_column(sa.String(32))
    worker: Mapped[str] = mapped_column(sa.String(64))
    detail: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)


_events = table_of(IdempotencyEvent)
_PENDING = "checkout.audit"
_COMMITTING = "checkout.audit.committing"

AuditEvent = dict[str, Any]  # created_at, customer, endpoint, key, name, worker, detail
_subscribers: list[Callable[[Sequence[AuditEvent]], None]] = []


def on_committed(subscriber: Callable[[Sequence[AuditEvent]], None]) -> None:
    """Call ``subscriber`` with the events of every unit of work that commits (after it has)."""
    if subscriber not in _subscribers:
        _subscribers.append(subscriber)


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


class Keyed(Protocol):
    """What an event is noted under: a Scope, or a record's row (customer, endpoint, key)."""

    @property
    def customer(self) -> str: ...
    @property
    def endpoint(self) -> str: ...
    @property
    def key(self) -> str: ...


def note(scope: Keyed, name: enum.StrEnum | str, **detail: Any) -> None:
    """Add an audit event to the current unit of work (tagged with the HTTP request, if there is one): what the
    engine's ``noted`` signal brings, and the steps the shop notes itself (reconcile, the gateway's webhook).

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


def _noted(_app: Flask, *, scope: Scope, name: str, detail: dict[str, Any]) -> None:
    note(scope, name, **detail)


def _purged(_app: Flask, *, scopes: Sequence[Scope]) -> None:
    """The engine purged these completed records: their steps go with them, in the same unit of work."""
    db.session.execute(
        sa.delete(_events).where(
            sa.tuple_(_events.c.customer, _events.c.endpoint, _events.c.key).in_(
                [(s.customer, s.endpoint, s.key) for s in scopes]
            )
        )
    )


def purge_old_events(lifetime_seconds: float, batch: int = 5000) -> None:
    """Events older than a key's lifetime (of records purged long ago, or of keys never stored), in batches."""
    old = utcnow() - timedelta(seconds=lifetime_seconds)
    gone = batch
    while gone == batch:
        with writing() as session:
            gone = len(
                session.execute(
                    sa.delete(_events)
                    .where(_events.c.id.in_(sa.select(_events.c.id).where(_events.c.created_at < old).limit(batch)))
                    .returning(_events.c.id)
                ).all()
            )


noted.connect(_noted)
purged.connect(_purged)
_INSERT_EVENTS = insert(_events)


@event.listens_for(Session, "before_commit")
def _write_pending_events(session: Session) -> None:
    pending = session.info.pop(_PENDING, None)
    if pending:
        session.execute(_INSERT_EVENTS, pending)
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


# --- one JSON line per committed event, for log pipelines ---------------------------------

# Not a child of the app's logger ("checkout"): Flask's handler there would prefix every line.
log = logging.getLogger("checkout_audit")
# What can be a card number: a run of 13 or more digits, written whole or in groups joined by one
# space or dash, that stands on its own. A run glued to a letter or an underscore is part of a longer
# token (the hex of a UUID-like key, "c85824c2-1234-5678-9012-af5cb7d7af16"; an id, "ord_<hex>").
# Luhn is not asked for, and runs longer than 19 digits are redacted too: a mistyped card number
# is still a card number but for one digit, and a false match costs only a log line's readability.
_CARD_LIKE = re.compile(r"(?<!\w)(?<!\d[ -])\d(?:[ -]?\d){12,}(?!\w)(?![ -]\d)")
REDACTED = "[redacted]"
# Looked for in a whole line first (most lines have nothing to redact): in JSON text with no escape,
# every value stands verbatim, so a line where this finds nothing has no value that needs scrubbing.
_DIGIT_RUN = re.compile(r"(?<!\w)\d(?:[ -]?\d){12,}")


def line_of(event: AuditEvent) -> str:
    """The event's JSON line, anything that can be a card number redacted."""
    record = record_of(event)
    text = json.dumps(record, ensure_ascii=False, default=str)
    if "\\" not in text and _DIGIT_RUN.search(text) is None:
        return text
    return scrubbed_line(record)


def scrubbed_line(record: dict[str, Any]) -> str:
    return json.dumps(scrub(record), ensure_ascii=False, default=lambda value: scrub(str(value)), sort_keys=False)


def record_of(event: AuditEvent) -> dict[str, Any]:
    detail: dict[str, Any] = dict(event["detail"])
    return {
        "at": event["created_at"].isoformat().replace("+00:00", "Z"),
        "event": event["name"],
        "customer": event["customer"],
        "endpoint": event["endpoint"],
        "key": event["key"],
        "order": detail.get("order_id"),
        "charge": detail.get("charge_id"),
        "refund": detail.get("refund_id"),
        "replay": event["name"] == Event.REPLAYED,
        "worker": event["worker"],
        "detail": detail,
    }


def scrub(value: Any) -> Any:
    """``value`` with anything that can be a card number redacted, in every string, key and number.

    Each value is scrubbed before it is written as JSON, not the JSON text after: an escape
    (``\\n4242...``) would glue a number to a letter there, and a redacted number would break the JSON.
    """
    if isinstance(value, str):
        return _CARD_LIKE.sub(REDACTED, value)
    if isinstance(value, dict):
        return {scrub(key): scrub(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        written = int.__repr__(value) if isinstance(value, int) else float.__repr__(value)  # as JSON writes it
        return _CARD_LIKE.sub(REDACTED, written) if _CARD_LIKE.search(written) else value
    return value


def log_committed(events: Sequence[AuditEvent]) -> None:
    if log.isEnabledFor(logging.INFO):
        for event in events:
            log.info(line_of(event))


def register_event_log() -> None:
    """Lines go to stderr (gunicorn and ``flask run`` show them) unless logging was set up otherwise."""
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    on_committed(log_committed)
