"""POST /webhooks/gateway: the gateway's events, delivered at least once, applied once.

A signed, fresh event is claimed by its id and applied in one unit of work; every change is a conditional UPDATE
from the state it expects, so whoever comes second (the worker or the webhook) changes nothing.
Design: docs/design.md#checkoutshopwebhookspy-the-webhook-receiver
"""

from __future__ import annotations

from typing import Annotated, Any, Self

import sqlalchemy as sa
from flask import Blueprint, Response, request
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, WithJsonSchema, model_validator

from checkout import metrics
from checkout.audit import IdempotencyRecord, note
from checkout.config import settings
from checkout.database import insert_ignoring_conflicts, reading, table_of, utcnow, writing
from checkout.errors import Problem
from checkout.extensions import csrf, db
from checkout.gateway import SUCCEEDED
from checkout.gateway.signing import HEADER, verify
from checkout.openapi import TOO_LARGE, described, problems
from checkout.shop import orders, payments, refunds
from checkout.shop.models import (
    DECLINED,
    PAID,
    PAYMENT_DECLINED,
    PAYMENT_SUCCEEDED,
    Customer,
    Refund,
    WebhookReceipt,
)
from checkout.shop.orders import OrderView
from checkout.shop.payment import PaymentEvent, end_order, gateway
from checkout.shop.schemas import Answer, clean_text, omittable

bp = Blueprint("webhooks", __name__)
csrf.exempt(bp)  # signed by the gateway: there is no browser session to forge

receipts = table_of(WebhookReceipt)
APPLIED, NO_CHANGE, IGNORED, DUPLICATE = "applied", "no change", "ignored", "duplicate"


# --- what the gateway sends, and what it is answered (the OpenAPI document publishes both) ---------------


class SignedHeaders(BaseModel):
    signature: Annotated[
        str,
        Field(
            alias="Gateway-Signature",
            description='t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">, keyed by the webhook secret; '
            "at most 300 s away from now.",
        ),
    ]


# What the shop reads is checked (a charge's and a refund's ids, the reference); what it only passes by is
# published as the gateway sends it and not checked, so a field the gateway changes cannot make a delivery
# fail, and be retried forever, for an event the shop would only have ignored.
_UNREAD = Field(json_schema_extra=omittable)


# The events the shop applies (checkout.shop.webhooks.apply); any other type is answered "ignored".
APPLIED_EVENTS = ("charge.succeeded", "charge.failed", "refund.succeeded")


def _findable(value: str | None) -> str | None:
    """A lookup with a NUL in it finds no row, and PostgreSQL cannot even be asked: it is read as absent."""
    return None if value is not None and "\x00" in value else value


class GatewayEventData(BaseModel):
    id: str | None = None  # stored by the events the shop applies: checked there (GatewayEvent)
    # Looked up, not stored: one that matches nothing is an event about nothing here, ignored.
    reference: Annotated[str | None, AfterValidator(_findable)] = None
    gateway_key: Annotated[str | None, AfterValidator(_findable)] = None
    amount_cents: Annotated[Any, WithJsonSchema({"type": "integer", "minimum": 0}), _UNREAD] = None
    currency: Annotated[Any, WithJsonSchema({"type": "string"}), _UNREAD] = None
    status: Annotated[Any, WithJsonSchema({"type": "string"}), _UNREAD] = None


def _event_text(raw: object) -> str:
    return clean_text(raw, max_length=40)  # no NUL: PostgreSQL cannot store one in the receipt


class GatewayEvent(BaseModel):
    id: Annotated[str, Field(min_length=1, max_length=40), BeforeValidator(_event_text)]
    type: Annotated[
        str,
        Field(max_length=40, examples=["charge.succeeded", "charge.failed", "refund.succeeded"]),
        BeforeValidator(_event_text),
    ]
    created: Annotated[
        Any,
        WithJsonSchema({"type": "integer", "description": "Unix seconds; the shop reads only the signature's."}),
        _UNREAD,
    ] = None
    data: GatewayEventData

    @model_validator(mode="after")
    def _storable_id(self) -> Self:
        """An event the shop applies stores ``data.id`` (the charge's or the refund's): it must fit the column."""
        if self.type in APPLIED_EVENTS and self.data.id is not None:
            clean_text(self.data.id, max_length=32)
        return self


class EventReceived(Answer):
    event: str
    result: Annotated[str, WithJsonSchema({"enum": ["applied", "no change", "ignored", "duplicate"]})]


def _event(raw: bytes) -> GatewayEvent:
    """The body, read by the same model the document publishes."""
    try:
        return GatewayEvent.model_validate_json(raw)
    except ValueError:  # pydantic's ValidationError is one
        raise Problem(400, "Malformed event", "The body is not a gateway event. Nothing was applied.") from None


@bp.post("/webhooks/gateway")
@described(
    operation_id="receiveGatewayEvent",
    tag="webhooks",
    public=True,
    body=GatewayEvent,
    headers=SignedHeaders,
    answers={
        200: (EventReceived, "Received: applied, or a repeated delivery that changed nothing."),
        400: problems("A missing, bad or stale signature, or a body that is not an event: nothing applied.",
                      "bad-signature", "bad-request"),
        413: TOO_LARGE,
    },
)  # fmt: skip
def receive() -> Response:
    """A payment gateway event, delivered at least once, applied once"""
    raw = request.get_data(cache=False)
    refused = verify(settings().webhook_secret, request.headers.get(HEADER), raw, int(utcnow().timestamp()))
    if refused:
        raise Problem(400, "Bad signature", f"Refused: {refused}. Nothing was applied.", type_="bad-signature")
    event = _event(raw)
    charged = _charged(event)  # asked before the unit of work, as every call to the gateway is
    detail: dict[str, Any]
    with writing():
        claimed = db.session.execute(
            insert_ignoring_conflicts(receipts, db.session, returning=(receipts.c.event_id,)),
            {
                "event_id": event.id,
                "type": event.type,
                "result": "received",
                "detail": {},
                "duplicates": 0,
                "received_at": utcnow(),
            },
        ).first()
        if claimed is None:
            db.session.execute(
                sa.update(receipts).where(receipts.c.event_id == event.id).values(duplicates=receipts.c.duplicates + 1)
            )
            result, detail = DUPLICATE, {}
        else:
            result, detail = apply(event.type, event.data, charged)
            db.session.execute(
                sa.update(receipts).where(receipts.c.event_id == event.id).values(result=result, detail=detail)
            )
    metrics.webhook_received(event.type, result)  # after the commit: it happened
    return Response(EventReceived(event=event.id, result=result).to_bytes(), mimetype="application/json")


def _charged(event: GatewayEvent) -> bool | None:
    """What the gateway's own ledger says of a charge event (fetch the object, never trust the event alone):
    for charge.succeeded, whether the charge it names exists, succeeded and is for its reference; for
    charge.failed, whether the key of the order or payment it names has a succeeded charge. None: not a charge."""
    data, ledger = event.data, gateway()
    if event.type == "charge.succeeded":
        row = ledger.charge_by_id(data.id) if data.id else None
        return row is not None and row.status == SUCCEEDED and row.reference == data.reference
    if event.type == "charge.failed":
        with reading():
            key = orders.gateway_key_of(data.reference or "") or payments.gateway_key_of(data.reference or "")
        found = ledger.retrieve(key) if key else None
        return found is not None and found.succeeded
    return None


def apply(type_: str, data: GatewayEventData, charged: bool | None = None) -> tuple[str, dict[str, Any]]:
    """Apply one event inside the current unit of work; what happened. ``charged``: what the gateway's ledger
    says (``_charged``): an event it contradicts changes nothing."""
    if type_ in ("charge.succeeded", "refund.succeeded") and data.id is None:  # a success names what succeeded
        return IGNORED, {"why": "no charge or refund id"}
    if type_ == "charge.succeeded" and charged is False:
        return IGNORED, {"why": "the gateway holds no such succeeded charge for this reference"}
    if type_ == "charge.failed" and charged:
        return IGNORED, {"why": "the gateway charged this key: a failure does not undo a charge"}
    if type_ in ("charge.succeeded", "charge.failed"):
        reference = data.reference or ""
        order = orders.by_public_id(reference)
        if order is None:
            return _apply_to_payment(type_, reference, data.id)
        status = PAID if type_ == "charge.succeeded" else DECLINED
        ended = end_order(order, status, data.id)
        if ended is None:
            return NO_CHANGE, {}
        _note_on_its_key(ended)
        return APPLIED, {"order_id": order.public_id, "status": status}
    if type_ == "refund.succeeded":
        refund_id = db.session.scalar(sa.select(Refund.public_id).where(Refund.refund_key == (data.gateway_key or "")))
        refund = orders.refund_by_public_id(refund_id) if refund_id else None
        if refund is None:
            return IGNORED, {"why": "no such refund"}
        changed = refunds.mark_refunded(refund, data.id)
        return (APPLIED, {"refund_id": refund.public_id}) if changed else (NO_CHANGE, {})
    return IGNORED, {"why": "an event this shop does not use"}


def _note_on_its_key(order: OrderView) -> None:
    """The order's key says who ended it: the gateway's webhook came before the worker (whose answer was lost)
    or before the retry that would have resumed it. One event: whoever ends an order second changes nothing.
    Its scope is its record's (found by the customer and the order it made); an order whose record is elsewhere
    (the lab's Redis store, its twins) or gone (purged) gets no note."""
    customer = sa.select(Customer.public_id).where(Customer.id == order.customer_id).scalar_subquery()
    scope = db.session.execute(
        sa.select(IdempotencyRecord.customer, IdempotencyRecord.endpoint, IdempotencyRecord.key).where(
            IdempotencyRecord.customer == customer, IdempotencyRecord.reference == order.public_id
        )
    ).first()
    if scope is None:
        return
    event = PaymentEvent.CHARGED if order.status == PAID else PaymentEvent.DECLINED
    note(scope, event, order_id=order.public_id, charge_id=order.charge_id, by="webhook")


def _apply_to_payment(type_: str, reference: str, charge_id: str | None) -> tuple[str, dict[str, Any]]:
    """A charge of POST /api/payments (its reference is the payment's id): end the payment if it is pending.

    This finishes a payment whose answer was lost even if its client never comes back; the
    key's record, still unfinished, then answers the client's retry from the payment.
    """
    payment = payments.by_public_id(reference)
    if payment is None:
        return IGNORED, {"why": "no such order or payment"}
    status = PAYMENT_SUCCEEDED if type_ == "charge.succeeded" else PAYMENT_DECLINED
    ended = payments.end_pending(payment, status, charge_id)
    return (APPLIED, {"payment_id": payment.public_id, "status": status}) if ended else (NO_CHANGE, {})
