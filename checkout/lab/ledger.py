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
    rows = db.session.execute(sa.select(IdempotencyEvent.name, sa.func.count()).group_by(IdempotencyEvent.name)).all()
    counts = dict(rows)
    return {
        "replays": counts.get("replayed", 0),
        "conflicts": counts.get("conflict", 0),
        "mismatches": counts.get("mismatch", 0),
        "resumptions": counts.get("resumed", 0),
    }


def timeline(key: str) -> list[dict[str, Any]]:
    """Every event of one key, oldest first."""
    events = db.session.scalars(
        sa.select(IdempotencyEvent).where(IdempotencyEvent.key == key).order_by(IdempotencyEvent.id)
    ).all()
    return [
        {"at": e.created_at, "event": e.name, "worker": e.worker, "endpoint": e.endpoint, **e.detail} for e in events
    ]


DUPLICATE_WINDOW_SECONDS = 120


def damage() -> list[dict[str, Any]]:
    """Per customer: what they ordered, what they were charged, and what they were charged twice.

    On the safe path an order has at most one succeeded charge, so "twice" is
    0. The unsafe path has no key to tell a retry from a new purchase; the lab
    counts an unsafe order as a duplicate when the same customer placed one
    for the same email and total within two minutes before it.
    """
    orders = db.session.execute(
        sa.select(Order, Customer.public_id, Customer.name).join(Customer).order_by(Order.created_at, Order.id)
    ).all()
    # Per order: the money its succeeded charges took, and how many there were.
    succeeded = {
        reference: (amount or 0, count)
        for reference, amount, count in db.session.execute(
            sa.select(GatewayCharge.reference, sa.func.sum(GatewayCharge.amount_cents), sa.func.count())
            .where(GatewayCharge.status == "succeeded")
            .group_by(GatewayCharge.reference)
        )
    }
    rows: dict[str, dict[str, Any]] = {}  # by "customer:unsafe"
    last_unsafe: dict[tuple[str, str, int], Any] = {}
    for order, customer, name in orders:
        # One row per customer and path, so the safe and unsafe checkouts stand side by side.
        row = rows.setdefault(
            f"{customer}:{order.unsafe}",
            {
                "customer": customer,
                "name": name,
                "ordered_cents": 0,
                "charged_cents": 0,
                "charged_twice_cents": 0,
                "unsafe": order.unsafe,
                "currency": order.currency,
            },
        )
        amount, charges = succeeded.get(order.public_id, (0, 0))
        row["charged_cents"] += amount
        extra = max(0, charges - 1) * order.total_cents
        signature = (customer, order.email, order.total_cents)
        previous = last_unsafe.get(signature) if order.unsafe else None
        duplicate = previous is not None and (order.created_at - previous).total_seconds() <= DUPLICATE_WINDOW_SECONDS
        if order.unsafe:
            last_unsafe[signature] = order.created_at
        if duplicate:
            row["charged_twice_cents"] += amount
        else:
            row["ordered_cents"] += order.total_cents if order.status in ("paid", "pending") else 0
        row["charged_twice_cents"] += extra
    return sorted(rows.values(), key=lambda r: (r["customer"], r["unsafe"]))


def totals() -> dict[str, int]:
    """The whole ledger in three numbers, for scripts that measure a run."""
    charged, charges = db.session.execute(
        sa.select(sa.func.coalesce(sa.func.sum(GatewayCharge.amount_cents), 0), sa.func.count()).where(
            GatewayCharge.status == "succeeded"
        )
    ).one()
    orders = db.session.scalar(sa.select(sa.func.count()).select_from(Order))
    return {"charged_cents": int(charged), "succeeded_charges": int(charges), "orders": int(orders or 0)}
