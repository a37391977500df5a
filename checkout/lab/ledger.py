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
        sa.select(IdempotencyRecord).order_by(IdempotencyRecord.created_at.desc(), IdempotencyRecord.id.desc())
        .limit(limit)
    ).all()
    orders = db.session.execute(
        sa.select(Order, Customer.public_id).join(Customer)
        .order_by(Order.created_at.desc(), Order.id.desc()).limit(limit)
    ).all()
    charges = db.session.scalars(
        sa.select(GatewayCharge).order_by(GatewayCharge.created_at.desc(), GatewayCharge.id.desc()).limit(limit)
    ).all()
    events = db.session.scalars(
        sa.select(IdempotencyEvent).order_by(IdempotencyEvent.created_at.desc(), IdempotencyEvent.id.desc())
        .limit(limit * 5)
    ).all()
    db.session.commit()
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
                "unsafe": o.unsafe,
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


def counters() -> dict[str, int]:
    """How often each layer of the defence worked: replays, conflicts, mismatches, resumptions."""
    rows = db.session.execute(
        sa.select(IdempotencyEvent.name, sa.func.count()).group_by(IdempotencyEvent.name)
    ).all()
    db.session.commit()
    counts = {name: count for name, count in rows}
    return {
        "replays": counts.get("replayed", 0),
        "conflicts": counts.get("conflict", 0),
        "mismatches": counts.get("mismatch", 0),
        "resumptions": counts.get("resumed", 0),
    }
