"""Refunds: a second idempotent endpoint, with its own key scope, and never more than charged.

The amount is reserved on the order by a conditional UPDATE that a CHECK backs; the gateway refunds under a key
derived from the refund, so reconcile can always finish one by asking again.
Design: docs/design.md#checkoutshoprefundspy-refunds-in-phases
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Protocol

import sqlalchemy as sa

from checkout.database import assert_idle, public_id, table_of, utcnow
from checkout.extensions import db
from checkout.gateway import Gateway, GatewayTimeout, GatewayUnavailable
from checkout.gateway import Refund as GatewayRefundAnswer
from checkout.i18n import N_
from checkout.idempotency import (
    Complete,
    MoveTo,
    Operation,
    Pipeline,
    Refuse,
    RetryLater,
    Step,
    StoredResponse,
    json_bytes,
)
from checkout.shop import orders, schemas
from checkout.shop.answers import ProblemKind
from checkout.shop.models import (
    PARTIALLY_REFUNDED,
    REFUND_PENDING,
    REFUND_SUCCEEDED,
    REFUNDABLE,
    REFUNDED,
    WAS_PAID,
    Order,
    Refund,
)
from checkout.shop.orders import OrderView, RefundView, refund_by_public_id
from checkout.shop.payment import Phases

REFUND_CREATED = "refund_created"
API_REFUNDS = "POST /api/orders/<order_id>/refunds"
BROWSER_REFUNDS = "POST /orders/<order_id>/refunds"

refunds = table_of(Refund)
order_table = table_of(Order)


class RefundEvent(enum.StrEnum):
    REFUND_CREATED = "refund_created"
    GATEWAY_CALLED = "gateway_called"
    REFUNDED = "refunded"
    REFUND_EXCEEDS_CHARGE = "refund_exceeds_charge"
    GATEWAY_UNAVAILABLE = "gateway_unavailable"
    ANSWER_LOST = "answer_lost"
    ALREADY_REFUNDED = "already_refunded"  # a late retry: the refunds' unique (order, key) found its refund


def refund_key_for(refund_public_id: str) -> str:
    return f"refund-{refund_public_id}"


# --- answers ------------------------------------------------------------------------


class RefundResponder(Protocol):
    def refunded(self, refund: RefundView) -> StoredResponse: ...

    def not_refundable(self, order: OrderView) -> StoredResponse: ...

    def exceeds(self, order: OrderView, asked: int, left: int) -> StoredResponse: ...


NOT_REFUNDABLE = ProblemKind(422, "Order not refundable", "order-not-refundable")
REFUND_EXCEEDS = ProblemKind(422, "Refund exceeds charge", "refund-exceeds-charge")


class ApiRefundResponder:
    def refunded(self, refund: RefundView) -> StoredResponse:
        location = f"/api/orders/{refund.order_public_id}/refunds/{refund.public_id}"
        return StoredResponse(
            201, {"Content-Type": "application/json", "Location": location}, schemas.Refund.of(refund).to_bytes()
        )

    def not_refundable(self, order: OrderView) -> StoredResponse:
        detail = f"Order {order.public_id} is {order.status}: only a paid order can be refunded."
        return NOT_REFUNDABLE.stored(detail, order_id=order.public_id)

    def exceeds(self, order: OrderView, asked: int, left: int) -> StoredResponse:
        detail = (
            f"Order {order.public_id} is fully refunded: nothing is left to refund."
            if left == 0
            else f"Asked to refund {asked} cents; {left} cents of order {order.public_id} are left to refund."
        )
        return REFUND_EXCEEDS.stored(detail, order_id=order.public_id, refundable_cents=left)


def _json_answer(status: int, **outcome: object) -> StoredResponse:
    return StoredResponse(status, {"Content-Type": "application/json"}, json_bytes(outcome))


class BrowserRefundResponder:
    """The browser's refund form stores what happened; the order page says it."""

    def refunded(self, refund: RefundView) -> StoredResponse:
        return _json_answer(303, outcome="refunded", refund_id=refund.public_id, amount_cents=refund.amount_cents)

    def not_refundable(self, order: OrderView) -> StoredResponse:
        return _json_answer(422, outcome="not_refundable")

    def exceeds(self, order: OrderView, asked: int, left: int) -> StoredResponse:
        return _json_answer(422, outcome="exceeds", asked_cents=asked, left_cents=left)


# --- the phases ------------------------------------------------------------------------


@dataclass(frozen=True)
class RefundRequest:
    customer_id: int
    order_public_id: str
    idempotency_key: str
    amount_cents: int | None  # None: everything that is left
    reason: str


def _reserve(order: OrderView, amount: int) -> bool:
    """Take ``amount`` off what is left to refund, and set the order's refund status, in one UPDATE."""
    total = order_table.c.total_cents
    after = order_table.c.refunded_cents + amount
    row = db.session.execute(
        sa.update(order_table)
        .where(order_table.c.id == order.id, order_table.c.status.in_(REFUNDABLE), after <= total)
        .values(refunded_cents=after, status=sa.case((after == total, REFUNDED), else_=PARTIALLY_REFUNDED))
        .returning(order_table.c.id)
    ).first()
    return row is not None


@dataclass
class PlaceRefund(Phases[RefundView]):
    """One refund of a paid order: ``started`` → ``refund_created`` → finished."""

    created: ClassVar[str] = REFUND_CREATED
    request: RefundRequest
    respond: RefundResponder
    gateway: Gateway
    pipeline: Pipeline  # the endpoint's, told with the refund it places

    def create(self, operation: Operation, _no_call: None) -> Step:
        order = orders.load(
            sa.and_(
                order_table.c.public_id == self.request.order_public_id,
                order_table.c.customer_id == self.request.customer_id,
            )
        )
        assert order is not None  # the view checked it is this customer's
        # The refunds' own unique (order, key) first: a late retry (its record purged) made this
        # refund already, and what is left to refund now does not include the money it gave back.
        made = next((r for r in order.refunds if r.idempotency_key == self.request.idempotency_key), None)
        if made is not None:
            return self._made(operation, made)
        if order.status not in WAS_PAID or order.charge_id is None:
            raise Refuse(self.respond.not_refundable(order))  # nothing stored: it may become refundable
        # A refunded order was paid: what it has left to refund is nothing, a final answer (stored).
        left = orders.refundable_cents(order)
        amount = self.request.amount_cents if self.request.amount_cents is not None else left
        if amount <= 0 or amount > left or not _reserve(order, amount):
            operation.note(RefundEvent.REFUND_EXCEEDS_CHARGE, order_id=order.public_id, asked=amount, left=left)
            return Complete(self.respond.exceeds(order, amount, left))  # final under this key: stored
        refund_id = public_id("re")
        created = db.session.execute(
            sa.insert(refunds).returning(refunds.c.id),
            {
                "public_id": refund_id,
                "order_id": order.id,
                "idempotency_key": self.request.idempotency_key,
                "refund_key": refund_key_for(refund_id),
                "amount_cents": amount,
                "currency": order.currency,
                "reason": self.request.reason,
                "status": REFUND_PENDING,
                "created_at": utcnow(),
                "updated_at": utcnow(),
            },
        ).scalar_one()
        orders.tell(orders.refund_placed, pipeline=self.pipeline, refund_id=created)
        operation.reference = refund_id
        operation.note(RefundEvent.REFUND_CREATED, order_id=order.public_id, refund_id=refund_id, amount_cents=amount)
        operation.note(RefundEvent.GATEWAY_CALLED, refund_id=refund_id, gateway_key=refund_key_for(refund_id))
        self.keep(
            operation,
            RefundView(
                created,
                refund_id,
                order.public_id,
                order.id,
                order.charge_id,
                refund_key_for(refund_id),
                amount,
                order.currency,
                self.request.reason,
                REFUND_PENDING,
                utcnow(),
                self.request.idempotency_key,
            ),
        )
        return MoveTo(REFUND_CREATED)

    def _made(self, operation: Operation, made: RefundView) -> Step:
        """The refund this key made before its record was purged: a succeeded one is the answer (and
        is stored again under the key); a pending one is refunded on, under its own refund key."""
        operation.reference = made.public_id
        if made.status == REFUND_SUCCEEDED:
            operation.note(RefundEvent.ALREADY_REFUNDED, order_id=made.order_public_id, refund_id=made.public_id)
            return Complete(self.respond.refunded(made))
        operation.note(RefundEvent.GATEWAY_CALLED, refund_id=made.public_id, gateway_key=made.refund_key)
        self.keep(operation, made)
        return MoveTo(REFUND_CREATED)

    def load(self, public_id: str) -> RefundView | None:
        return refund_by_public_id(public_id)

    def call(self, operation: Operation) -> GatewayRefundAnswer:
        return call_gateway(self.gateway, self.made(operation))

    def record(self, operation: Operation, answer: GatewayRefundAnswer) -> Step:
        refund = self.made(operation)
        if mark_refunded(refund, answer.id):
            operation.note(RefundEvent.REFUNDED, refund_id=refund.public_id, gateway_refund_id=answer.id)
        done = refund_by_public_id(refund.public_id)
        assert done is not None
        return Complete(self.respond.refunded(done))


def call_gateway(gateway: Gateway, refund: RefundView) -> GatewayRefundAnswer:
    """Ask the gateway to refund (no transaction may be open): the same refund key on every retry."""
    assert_idle()
    try:
        return gateway.refund(
            refund_key=refund.refund_key,
            charge_id=str(refund.charge_id),
            amount_cents=refund.amount_cents,
            currency=refund.currency,
        )
    except GatewayUnavailable as unavailable:
        raise RetryLater(
            N_("the payment gateway is unavailable; nothing was refunded"),
            event=RefundEvent.GATEWAY_UNAVAILABLE,
            refund_id=refund.public_id,
        ) from unavailable
    except GatewayTimeout as timeout:
        raise RetryLater(
            N_("the payment gateway did not answer in time"), event=RefundEvent.ANSWER_LOST, refund_id=refund.public_id
        ) from timeout


def mark_refunded(refund: RefundView, gateway_refund_id: str | None) -> bool:
    """The gateway refunded: mark it, and write its receipt, once (the worker or the webhook, whoever is first)."""
    changed = db.session.execute(
        sa.update(refunds)
        .where(refunds.c.id == refund.id, refunds.c.status == REFUND_PENDING)
        .values(status=REFUND_SUCCEEDED, gateway_refund_id=gateway_refund_id, updated_at=utcnow())
        .returning(refunds.c.id)
    ).first()
    if changed is None:
        return False
    order = orders.by_public_id(refund.order_public_id)
    assert order is not None
    orders.refund_receipt(refund.public_id, refund.amount_cents, refund.currency, order)
    return True
