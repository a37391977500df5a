"""Placing an order, as atomic phases with recovery points.

    started ──(order row)──▶ order_created ──▶ charge_attempted ──(gateway)──▶ finished

Each arrow is one transaction that also moves the recovery point, so a retry
(or ``reconcile``) that takes over an abandoned operation knows exactly what
has been done. The gateway is called between transactions, never inside one,
with a key derived from the order: asking it again can never charge twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from checkout.extensions import db
from checkout.gateway import (
    CardDeclined,
    Charge,
    Gateway,
    GatewayTimeout,
    GatewayUnavailable,
)
from checkout.idempotency import STARTED, Operation, RetryLater, StoredResponse
from checkout.shop.models import DECLINED, FAILED, PAID, PENDING, Order, OrderItem, public_id
from checkout.shop.responders import Responder

ORDER_CREATED = "order_created"
CHARGE_ATTEMPTED = "charge_attempted"


@dataclass(frozen=True)
class Line:
    sku: str
    name: str
    quantity: int
    unit_price_cents: int


@dataclass(frozen=True)
class OrderRequest:
    customer_id: int
    idempotency_key: str
    lines: tuple[Line, ...]
    email: str
    card_number: str  # digits only; never stored, only handed to the gateway
    currency: str

    @property
    def total_cents(self) -> int:
        return sum(line.quantity * line.unit_price_cents for line in self.lines)


def gateway_key_for(order_public_id: str) -> str:
    return f"charge-{order_public_id}"


def find_order(customer_id: int, idempotency_key: str) -> Order | None:
    return db.session.scalars(
        sa.select(Order).where(Order.customer_id == customer_id, Order.idempotency_key == idempotency_key)
    ).first()


def _create_order(request: OrderRequest) -> Order:
    """Insert the order; if the key already has one (its record was purged), use that."""
    order_id = public_id("ord")
    order = Order(
        public_id=order_id,
        gateway_key=gateway_key_for(order_id),
        customer_id=request.customer_id,
        idempotency_key=request.idempotency_key,
        email=request.email,
        card_last4=request.card_number[-4:],
        total_cents=request.total_cents,
        currency=request.currency,
        status=PENDING,
        items=[
            OrderItem(sku=line.sku, name=line.name, quantity=line.quantity, unit_price_cents=line.unit_price_cents)
            for line in request.lines
        ],
    )
    try:
        with db.session.begin_nested():
            db.session.add(order)
            db.session.flush()
    except IntegrityError:
        existing = find_order(request.customer_id, request.idempotency_key)
        if existing is None:
            raise
        return existing
    return order


def place_order(operation: Operation, request: OrderRequest, respond: Responder, gateway: Gateway) -> None:
    """Run (or resume) the order's phases and complete the operation with the endpoint's answer."""
    if operation.recovery_point == STARTED:
        with operation.phase():
            order = _create_order(request)
            operation.note("order_created", order_id=order.public_id)
            operation.checkpoint(ORDER_CREATED)
    else:
        found = find_order(request.customer_id, request.idempotency_key)
        db.session.commit()  # end the read: no transaction may be open while the gateway works
        if found is None:
            raise RuntimeError(f"recovery point {operation.recovery_point} but no order")
        order = found

    if order.status != PENDING:
        # The order outlived its idempotency record (purged): answer from the order itself.
        with operation.phase():
            operation.complete(answer_for(order, respond))
        return

    with operation.phase():
        operation.checkpoint(CHARGE_ATTEMPTED)
        operation.note("gateway_called", order_id=order.public_id, gateway_key=order.gateway_key)
    try:
        charge = gateway.charge(
            gateway_key=order.gateway_key,
            amount_cents=order.total_cents,
            currency=order.currency,
            card_number=request.card_number,
            reference=order.public_id,
        )
    except CardDeclined as declined:
        with operation.phase():
            order.status = DECLINED
            order.charge_id = declined.charge.id
            operation.note("declined", order_id=order.public_id, charge_id=declined.charge.id)
            operation.complete(respond.declined(order))
        return
    except GatewayUnavailable as unavailable:
        raise RetryLater(
            "the payment gateway is unavailable; nothing was charged",
            retry_after=1,
            event="gateway_unavailable",
            order_id=order.public_id,
        ) from unavailable
    except GatewayTimeout as timeout:
        raise RetryLater(
            "the payment gateway did not answer in time", retry_after=1, event="answer_lost", order_id=order.public_id
        ) from timeout
    finish_paid(operation, order, charge, respond)


def finish_paid(operation: Operation, order: Order, charge: Charge, respond: Responder) -> None:
    with operation.phase():
        order.status = PAID
        order.charge_id = charge.id
        operation.note("charged", order_id=order.public_id, charge_id=charge.id)
        operation.complete(respond.paid(order))


def answer_for(order: Order, respond: Responder) -> StoredResponse:
    """The endpoint's answer for an order that already has its outcome."""
    if order.status == PAID:
        return respond.paid(order)
    if order.status == DECLINED:
        return respond.declined(order)
    assert order.status == FAILED
    return respond.abandoned(order)
