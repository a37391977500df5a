"""What the lab shows: records, orders, the articles' payments, charges and the audit trail, newest first."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from checkout.audit import IdempotencyEvent, IdempotencyRecord
from checkout.extensions import db
from checkout.gateway import GatewayCharge, GatewayEvent
from checkout.i18n import N_, _
from checkout.lab import damage
from checkout.lab.servers import servers_of
from checkout.lab.tables import SAFE, LabOrder, LabRefund, LabStock, charged_for, path_of_order
from checkout.shop.models import (
    HOLDS_STOCK,
    Customer,
    Order,
    OrderItem,
    Payment,
    Product,
    Refund,
    WebhookReceipt,
    offered_to,
)
from checkout.shop.payments import is_payment_id

LIMIT = 200


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def belongs_to(customer: str, reference: sa.orm.InstrumentedAttribute[str]) -> sa.ColumnElement[bool]:
    """A charge's reference is the customer's: one of its orders (a twin that charges per attempt adds "/<attempt>"),
    or one of its API payments (a seat's lab shows only its own charges)."""
    owner = sa.select(Customer.id).where(Customer.public_id == customer).scalar_subquery()
    order = sa.exists().where(Order.customer_id == owner, charged_for(reference, Order.public_id))
    return sa.or_(order, sa.exists().where(Payment.customer_id == owner, reference == Payment.public_id))


def ledger(limit: int = LIMIT, customer: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """The latest rows of each table: everyone's, or one customer's (a seat's, in a workshop)."""
    records_query = sa.select(IdempotencyRecord)
    orders_query = sa.select(Order, Customer.public_id, path_of_order(), LabOrder.purchase_ref).join(Customer)
    payments_query = sa.select(Payment, Customer.public_id).join(Customer)
    charges_query = sa.select(GatewayCharge)
    events_query = sa.select(IdempotencyEvent)
    if customer is not None:
        records_query = records_query.where(IdempotencyRecord.customer == customer)
        orders_query = orders_query.where(Customer.public_id == customer)
        payments_query = payments_query.where(Customer.public_id == customer)
        charges_query = charges_query.where(belongs_to(customer, GatewayCharge.reference))
        events_query = events_query.where(IdempotencyEvent.customer == customer)
    records = db.session.scalars(
        records_query.order_by(IdempotencyRecord.created_at.desc(), IdempotencyRecord.id.desc()).limit(limit)
    ).all()
    orders = db.session.execute(
        orders_query.outerjoin(LabOrder, LabOrder.order_id == Order.id)
        .order_by(Order.created_at.desc(), Order.id.desc())
        .limit(limit)
    ).all()
    newest_payments = payments_query.order_by(Payment.created_at.desc(), Payment.id.desc())
    payments = db.session.execute(newest_payments.limit(limit)).all()
    charges = db.session.scalars(
        charges_query.order_by(GatewayCharge.created_at.desc(), GatewayCharge.id.desc()).limit(limit)
    ).all()
    events = db.session.scalars(
        events_query.order_by(IdempotencyEvent.created_at.desc(), IdempotencyEvent.id.desc()).limit(limit * 5)
    ).all()
    server_of = servers_of(e.worker for e in events)
    return {
        "records": [
            {
                "customer": r.customer,
                "endpoint": r.endpoint,
                "key": r.key,
                "state": r.state,
                "recovery_point": r.recovery_point,
                "response_status": r.response_status,
                "locked_until": iso(r.locked_until) if r.locked_by else None,
                "created_at": iso(r.created_at),
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
                "path": path,
                "unsafe": path not in damage.PROTECTED_PATHS,
                "purchase": purchase,
                "created_at": iso(o.created_at),
            }
            for o, customer, path, purchase in orders
        ],
        # POST /api/payments, the articles' own request: ``order_id`` is the client's reference, as the API says it.
        "payments": [
            {
                "id": p.public_id,
                "customer": customer,
                "idempotency_key": p.idempotency_key,
                "order_id": p.order_ref,
                "amount": p.amount,
                "currency": p.currency,
                "status": p.status,
                "charge_id": p.charge_id,
                "created_at": iso(p.created_at),
            }
            for p, customer in payments
        ],
        # A charge is for an order of the shop (``order_id``) or for one of those payments (``payment_id``).
        "charges": [
            {
                "id": c.id,
                "gateway_key": c.gateway_key,
                "order_id": None if is_payment_id(c.reference) else c.reference,
                "payment_id": c.reference if is_payment_id(c.reference) else None,
                "amount_cents": c.amount_cents,
                "currency": c.currency,
                "status": c.status,
                "created_at": iso(c.created_at),
            }
            for c in charges
        ],
        "events": [
            {
                "at": iso(e.created_at),
                "customer": e.customer,
                "endpoint": e.endpoint,
                "key": e.key,
                "event": e.name,
                "worker": e.worker,
                "server": server_of.get(e.worker),  # the app server's CHECKOUT_SERVER_NAME, if it has one
                **e.detail,
            }
            for e in events
        ],
    }


# What each counter means, for a workshop reading the lab on a projector.
COUNTERS = {
    "replays": ("replayed", N_("a retry got the stored answer back, byte for byte")),
    "conflicts": ("conflict", N_("a duplicate arrived while the first request was still running")),
    "mismatches": ("mismatch", N_("a key came back with a different body, and was refused")),
    "resumptions": ("resumed", N_("a retry took over a payment left unfinished, from its recovery point")),
    "reconciled": ("reconcile_started", N_("reconcile took over a payment nobody was finishing")),
}
# What the shop did with a gateway event (a webhook receipt's result: an identifier in the shop's JSON answer),
# marked here so that the lab's table shows it in the page's language (``w.result|t``).
WEBHOOK_RESULTS = (N_("received"), N_("applied"), N_("no change"), N_("ignored"), N_("duplicate"))
# The audit trail's reasons (an event's ``reason`` detail) stay English where they are stored, in the JSON API
# and the logs; the lab's timeline words them in the page's language. Most are sentences marked with N_ where
# they are raised (the payment gateway is unavailable...); the engine's one-word codes get a sentence here.
REASONS = {
    "error": N_("an unexpected error: the lease was given back, nothing was stored"),
    "refused": N_("refused: nothing was stored, the key can be used again"),
    "abandoned before an order existed": N_("abandoned before an order existed"),
    "abandoned before a payment existed": N_("abandoned before a payment existed"),
    "abandoned before a refund existed": N_("abandoned before a refund existed"),
}


def reason_label(reason: object) -> str:
    """An audit event's reason in the page's language (a reason nobody marked stays as it is)."""
    text = str(reason)
    return _(REASONS.get(text, text)) if text else text


# What the lab's counters are called on the page (the keys above stay identifiers, in data-testid).
COUNTER_LABELS = {
    "replays": N_("replays"),
    "conflicts": N_("conflicts"),
    "mismatches": N_("mismatches"),
    "resumptions": N_("resumptions"),
    "reconciled": N_("reconciled"),
}


def counters(customer: str | None = None) -> dict[str, int]:
    """How often each layer of the defence worked: replays, conflicts, mismatches, resumptions, reconciles."""
    query = sa.select(IdempotencyEvent.name, sa.func.count()).group_by(IdempotencyEvent.name)
    if customer is not None:
        query = query.where(IdempotencyEvent.customer == customer)
    rows = db.session.execute(query).all()
    counts = dict(rows)  # a Result has keys(): dict() would read it as a mapping
    return {counter: counts.get(event, 0) for counter, (event, _meaning) in COUNTERS.items()}


def timeline(key: str, customer: str | None = None, endpoint: str | None = None) -> list[dict[str, Any]]:
    """Every event of one key, oldest first, with the time since the step before it: of one customer's use of it on
    one endpoint when they are given (a key means something only in its scope: two customers may pick the same)."""
    query = sa.select(IdempotencyEvent).where(IdempotencyEvent.key == key)
    if customer is not None:
        query = query.where(IdempotencyEvent.customer == customer)
    if endpoint is not None:
        query = query.where(IdempotencyEvent.endpoint == endpoint)
    events = db.session.scalars(query.order_by(IdempotencyEvent.id)).all()
    server_of = servers_of(e.worker for e in events)
    return [
        {
            "at": e.created_at,
            "since_previous": (e.created_at - previous.created_at).total_seconds() if previous is not None else 0.0,
            "event": e.name,
            "worker": e.worker,
            "server": server_of.get(e.worker),  # which app server took this step (behind a proxy)
            "endpoint": e.endpoint,
            **e.detail,
        }
        for previous, e in zip([None, *events], events, strict=False)
    ]


def latest_key_of(customer: str) -> str | None:
    """The key of this customer's most recent operation (this browser's, in the lab)."""
    return db.session.scalar(
        sa.select(IdempotencyRecord.key)
        .where(IdempotencyRecord.customer == customer)
        .order_by(IdempotencyRecord.created_at.desc(), IdempotencyRecord.id.desc())
        .limit(1)
    )


def totals(customer: str | None = None) -> dict[str, int]:
    """The whole ledger (or one customer's) in three numbers, for scripts that measure a run."""
    charges_query = sa.select(sa.func.coalesce(sa.func.sum(GatewayCharge.amount_cents), 0), sa.func.count()).where(
        GatewayCharge.status == "succeeded"
    )
    orders_query = sa.select(sa.func.count()).select_from(Order)
    if customer is not None:
        charges_query = charges_query.where(belongs_to(customer, GatewayCharge.reference))
        orders_query = orders_query.join(Customer).where(Customer.public_id == customer)
    charged, charges = db.session.execute(charges_query).one()
    orders = db.session.scalar(orders_query)
    return {"charged_cents": int(charged), "succeeded_charges": int(charges), "orders": int(orders or 0)}


def refunds_list(limit: int = LIMIT, customer: str | None = None) -> list[dict[str, Any]]:
    query = (
        sa.select(Refund, Order.public_id, sa.func.coalesce(LabRefund.path, SAFE))
        .join(Order, Order.id == Refund.order_id)
        .outerjoin(LabRefund, LabRefund.refund_id == Refund.id)
    )
    if customer is not None:
        query = query.join(Customer, Customer.id == Order.customer_id).where(Customer.public_id == customer)
    rows = db.session.execute(query.order_by(Refund.created_at.desc(), Refund.id.desc()).limit(limit)).all()
    return [
        {
            "id": r.public_id,
            "order_id": order_id,
            "amount_cents": r.amount_cents,
            "currency": r.currency,
            "status": r.status,
            "path": path,
            "idempotency_key": r.idempotency_key,
            "created_at": iso(r.created_at),
        }
        for r, order_id, path in rows
    ]


def stock_list(customer: str | None = None) -> list[dict[str, Any]]:
    """Per product: on the shelf, held by orders, ever stocked; ``balanced`` is the stock invariant. (Every
    product, or those a customer is offered: a seat sees its own lamp, not the class's.)"""
    held = dict(
        db.session.execute(
            sa.select(OrderItem.sku, sa.func.sum(OrderItem.quantity))
            .join(Order, Order.id == OrderItem.order_id)
            .where(Order.status.in_(HOLDS_STOCK))
            .group_by(OrderItem.sku)
        ).all()
    )
    shelves = (
        sa.select(Product.sku, Product.name, Product.stock, sa.func.coalesce(LabStock.seeded, 0))
        .outerjoin(LabStock, LabStock.sku == Product.sku)
        .order_by(Product.id)
    )
    if customer is not None:
        shelves = shelves.where(
            offered_to(db.session.scalar(sa.select(Customer.id).where(Customer.public_id == customer)))
        )
    products = db.session.execute(shelves).all()
    return [
        {
            "sku": sku,
            "name": name,
            "stock": stock,
            "held": int(held.get(sku, 0)),
            "seeded": seeded,
            "balanced": seeded == stock + int(held.get(sku, 0)),
        }
        for sku, name, stock, seeded in products
    ]


def webhook_list(limit: int = 50, customer: str | None = None) -> list[dict[str, Any]]:
    """The gateway's events, newest first, each with what the shop did with it (a customer's: of its charges)."""
    newest = sa.select(GatewayEvent).order_by(GatewayEvent.created.desc(), GatewayEvent.id.desc())
    events = db.session.scalars(newest.limit(limit if customer is None else limit * 20)).all()
    if customer is not None:  # the reference is inside the event's JSON: the customer's are picked out here
        mine = set(
            db.session.scalars(
                sa.select(GatewayCharge.reference).where(
                    GatewayCharge.reference.in_({str(e.data.get("reference")) for e in events}),
                    belongs_to(customer, GatewayCharge.reference),
                )
            )
        )
        events = [e for e in events if e.data.get("reference") in mine][:limit]
    receipts = {
        r.event_id: r
        for r in db.session.scalars(
            sa.select(WebhookReceipt).where(WebhookReceipt.event_id.in_([e.id for e in events]))
        )
    }
    return [
        {
            "id": e.id,
            "type": e.type,
            "reference": e.data.get("reference"),
            "attempts": e.attempts,
            "delivered": e.delivered_at is not None,
            "last_status": e.last_status,
            "result": receipts[e.id].result if e.id in receipts else None,
            "duplicates": receipts[e.id].duplicates if e.id in receipts else 0,
        }
        for e in events
    ]
