"""What the lab shows: records, orders, charges and the audit trail, newest first."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from checkout.extensions import db
from checkout.gateway import GatewayCharge
from checkout.idempotency import IdempotencyEvent, IdempotencyRecord
from checkout.shop.models import Customer, Order

LIMIT = 200


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def ledger(limit: int = LIMIT) -> dict[str, list[dict[str, Any]]]:
    records = db.session.scalars(
        sa.select(IdempotencyRecord)
        .order_by(IdempotencyRecord.created_at.desc(), IdempotencyRecord.id.desc())
        .limit(limit)
    ).all()
    orders = db.session.execute(
        sa.select(Order, Customer.public_id)
        .join(Customer)
        .order_by(Order.created_at.desc(), Order.id.desc())
        .limit(limit)
    ).all()
    charges = db.session.scalars(
        sa.select(GatewayCharge).order_by(GatewayCharge.created_at.desc(), GatewayCharge.id.desc()).limit(limit)
    ).all()
    events = db.session.scalars(
        sa.select(IdempotencyEvent)
        .order_by(IdempotencyEvent.created_at.desc(), IdempotencyEvent.id.desc())
        .limit(limit * 5)
    ).all()
    return {
        "records": [
            {
                "customer": r.customer,
                "endpoint": r.endpoint,
                "key": r.key,
                "state": r.state,
                "recovery_point": r.recovery_point,
                "response_status": r.response_status,
                "locked_until": _iso(r.locked_until) if r.locked_by else None,
                "created_at": _iso(r.created_at),
            }
            for r in records
        ],
        "orders": [
            {
                "id": o.public_id,
                "customer": customer,
                "idempotency_key": o.idempotency_key,
                "status": o.status,
                "total_cents": o.total_cents,
                "currency": o.currency,
                "charge_id": o.charge_id,
                "path": o.path,
                "unsafe": o.path != "safe",
                "purchase": o.purchase_ref,
                "created_at": _iso(o.created_at),
            }
            for o, customer in orders
        ],
        "charges": [
            {
                "id": c.id,
                "gateway_key": c.gateway_key,
                "order_id": c.reference,
                "amount_cents": c.amount_cents,
                "currency": c.currency,
                "status": c.status,
                "created_at": _iso(c.created_at),
            }
            for c in charges
        ],
        "events": [
            {
                "at": _iso(e.created_at),
                "customer": e.customer,
                "endpoint": e.endpoint,
                "key": e.key,
                "event": e.name,
                "worker": e.worker,
                **e.detail,
            }
            for e in events
        ],
    }


# What each counter means, for a workshop reading the lab on a projector.
COUNTERS = {
    "replays": ("replayed", "a retry got the stored answer back, byte for byte"),
    "conflicts": ("conflict", "a duplicate arrived while the first request was still running"),
    "mismatches": ("mismatch", "a key came back with a different body, and was refused"),
    "resumptions": ("resumed", "a retry took over a payment left unfinished, from its recovery point"),
    "reconciled": ("reconcile_started", "reconcile took over a payment nobody was finishing"),
}


def counters() -> dict[str, int]:
    """How often each layer of the defence worked: replays, conflicts, mismatches, resumptions, reconciles."""
    rows = db.session.execute(sa.select(IdempotencyEvent.name, sa.func.count()).group_by(IdempotencyEvent.name)).all()
    counts = dict(rows)
    return {counter: counts.get(event, 0) for counter, (event, _meaning) in COUNTERS.items()}


def timeline(key: str, customer: str | None = None) -> list[dict[str, Any]]:
    """Every event of one key, oldest first, with the time since the step before it."""
    query = sa.select(IdempotencyEvent).where(IdempotencyEvent.key == key)
    if customer is not None:
        query = query.where(IdempotencyEvent.customer == customer)
    events = db.session.scalars(query.order_by(IdempotencyEvent.id)).all()
    steps: list[dict[str, Any]] = []
    previous = None
    for e in events:
        since = (e.created_at - previous).total_seconds() if previous is not None else 0.0
        steps.append(
            {
                "at": e.created_at,
                "since_previous": since,
                "event": e.name,
                "worker": e.worker,
                "endpoint": e.endpoint,
                **e.detail,
            }
        )
        previous = e.created_at
    return steps


def latest_key_of(customer: str) -> str | None:
    """The key of this customer's most recent operation (this browser's, in the lab)."""
    return db.session.scalar(
        sa.select(IdempotencyRecord.key)
        .where(IdempotencyRecord.customer == customer)
        .order_by(IdempotencyRecord.created_at.desc(), IdempotencyRecord.id.desc())
        .limit(1)
    )


def totals() -> dict[str, int]:
    """The whole ledger in three numbers, for scripts that measure a run."""
    charged, charges = db.session.execute(
        sa.select(sa.func.coalesce(sa.func.sum(GatewayCharge.amount_cents), 0), sa.func.count()).where(
            GatewayCharge.status == "succeeded"
        )
    ).one()
    orders = db.session.scalar(sa.select(sa.func.count()).select_from(Order))
    return {"charged_cents": int(charged), "succeeded_charges": int(charges), "orders": int(orders or 0)}
