"""Finish operations nobody is working on any more, by asking the gateway.

A worker died mid-payment, stalled, or a client got a 503 and never came
back. For each such record we take the lease over (the same compare-and-set
a retry uses) and fence the order's gateway key before deciding anything:
the gateway voids the key unless a charge already stands under it. Whichever
won is final, so a stalled worker that wakes up later cannot charge behind
our back:

- a succeeded charge won: the order is paid; the stored answer is the success;
- a declined charge won: the order is declined; the stored answer is the decline;
- the void won: the order is ended as ``failed`` (nothing was or will be
  charged) and the stored answer says so;
- no order yet (a record that never got past its claim): the record is
  deleted, so the client's next retry starts afresh; nothing happened.

A payment of ``POST /api/payments`` is finished the same way as an order:
its gateway key is fenced, and the payment ends succeeded, declined or
failed as the gateway says (a record with no payment yet is deleted).

A refund needs no fence: it needs no card, so reconcile finishes it by asking
the gateway to refund again, with the same refund key (idempotent there).

Some payments have no record here to find: the lab's Redis store keeps its
records in Redis, and a worker that died there, or a record Redis forgot or
expired, leaves only a pending order holding its stock. Reconcile also looks
for those: pending orders of that store untouched for longer than a lease,
whose key no worker holds in Redis now. It fences each one's gateway key the
same way and ends the order as the gateway says (paid, or failed with its
stock given back, once: the order's own conditional status change decides).
A retry that comes later answers from the order.

The client sees the outcome on its next retry with the same key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flask import current_app

from checkout.gateway import Gateway
from checkout.idempotency import Complete, RetryLater, Settings, take_over
from checkout.idempotency.engine import abandoned
from checkout.idempotency.types import Event, LeaseLost, RecordView
from checkout.shop import orders, payments
from checkout.shop.orders import OrderView
from checkout.shop.placement import GatewayAnswer, PaymentEvent, finish
from checkout.shop.refunds import (
    API_REFUNDS,
    BROWSER_REFUNDS,
    ApiRefundResponder,
    BrowserRefundResponder,
    RefundResponder,
    mark_refunded,
)
from checkout.shop.refunds import call_gateway as call_refund
from checkout.shop.responders import API_PAYMENTS, RESPONDERS, ApiPaymentResponder
from checkout.transactions import reading


@dataclass(frozen=True)
class Reconciled:
    key: str
    endpoint: str
    customer: str
    outcome: str  # paid, declined, failed, refunded, succeeded (a payment), waiting, restarted, skipped
    order_id: str | None = None
    charge_id: str | None = None

    def __str__(self) -> str:
        parts = [f"{self.outcome:<9}", self.endpoint, f"key={self.key}", f"customer={self.customer}"]
        if self.order_id:
            parts.append(f"order={self.order_id}")
        if self.charge_id:
            parts.append(f"charge={self.charge_id}")
        return " ".join(parts)


def _order_of(reference: str) -> OrderView | None:
    """The record's order; the read ends before the gateway is asked."""
    with reading():
        return orders.by_public_id(reference)


def reconcile_one(view: RecordView, gateway: Gateway, settings: Settings) -> Reconciled:
    if view.scope.endpoint in REFUND_RESPONDERS:
        return _reconcile_refund(view, gateway, settings)
    if view.scope.endpoint == API_PAYMENTS:
        return _reconcile_payment(view, gateway, settings)
    scope = view.scope
    skipped = Reconciled(scope.key, scope.endpoint, scope.customer, "skipped")
    respond = RESPONDERS.get(scope.endpoint)
    if respond is None:
        return skipped  # an endpoint this command does not know
    operation = take_over(view, settings, by=Event.RECONCILE_STARTED)
    if operation is None:
        return skipped  # a client's retry got there first: it will finish it
    try:
        order = _order_of(operation.reference) if operation.reference else None
        if order is None:
            operation.discard("abandoned before an order existed")
            return Reconciled(scope.key, scope.endpoint, scope.customer, "restarted")
        answer = fence(gateway, order)
        with operation.owned():
            operation.note(PaymentEvent.RECONCILED, order_id=order.public_id, gateway_says=answer.status)
            operation.apply(finish(operation, order, answer, respond))
        ended = _order_of(order.public_id)
        assert ended is not None
        outcome, charge_id = ended.status, ended.charge_id
    except LeaseLost:
        return skipped  # a client's retry took it over meanwhile: it will finish it
    return Reconciled(scope.key, scope.endpoint, scope.customer, outcome, order.public_id, charge_id)


def fence(gateway: Gateway, order: OrderView) -> GatewayAnswer:
    """Void the order's gateway key unless a charge already stands under it: whichever stands is final,
    so a stalled worker that wakes up later cannot charge behind reconcile's back."""
    return GatewayAnswer.of(gateway.void(gateway_key=order.gateway_key, reference=order.public_id))


# Finishers of abandoned work whose records live outside this database, registered by whoever keeps
# them there (the lab's Redis store): app.extensions[RECONCILERS], each called after the records' own.
RECONCILERS = "checkout.reconcilers"
Reconciler = Callable[[Gateway, Settings], list["Reconciled"]]


def reconcile(gateway: Gateway, settings: Settings) -> list[Reconciled]:
    with reading():
        stale = abandoned(settings)
    done = [reconcile_one(view, gateway, settings) for view in stale]
    for finish_elsewhere in current_app.extensions.get(RECONCILERS, ()):
        done.extend(finish_elsewhere(gateway, settings))
    return done


REFUND_RESPONDERS: dict[str, RefundResponder] = {
    API_REFUNDS: ApiRefundResponder(),
    BROWSER_REFUNDS: BrowserRefundResponder(),
}


def _reconcile_refund(view: RecordView, gateway: Gateway, settings: Settings) -> Reconciled:
    scope = view.scope
    skipped = Reconciled(scope.key, scope.endpoint, scope.customer, "skipped")
    operation = take_over(view, settings, by=Event.RECONCILE_STARTED)
    if operation is None:
        return skipped
    try:
        with reading():
            refund = orders.refund_by_public_id(operation.reference) if operation.reference else None
        if refund is None:
            operation.discard("abandoned before a refund existed")
            return Reconciled(scope.key, scope.endpoint, scope.customer, "restarted")
        try:
            answer = call_refund(gateway, refund)
        except RetryLater as later:
            operation.release(later.reason, later.event, **later.detail)
            return Reconciled(scope.key, scope.endpoint, scope.customer, "waiting", refund.order_public_id)
        with operation.owned():
            mark_refunded(refund, answer.id)
            done = orders.refund_by_public_id(refund.public_id)
            assert done is not None
            operation.apply(Complete(REFUND_RESPONDERS[scope.endpoint].refunded(done)))
    except LeaseLost:
        return skipped
    return Reconciled(scope.key, scope.endpoint, scope.customer, "refunded", refund.order_public_id)


def _reconcile_payment(view: RecordView, gateway: Gateway, settings: Settings) -> Reconciled:
    """Fence an abandoned payment's gateway key, then end it as the gateway says (as for an order)."""
    scope = view.scope
    skipped = Reconciled(scope.key, scope.endpoint, scope.customer, "skipped")
    operation = take_over(view, settings, by=Event.RECONCILE_STARTED)
    if operation is None:
        return skipped  # a client's retry got there first: it will finish it
    try:
        with reading():
            payment = payments.by_public_id(operation.reference) if operation.reference else None
        if payment is None:
            operation.discard("abandoned before a payment existed")
            return Reconciled(scope.key, scope.endpoint, scope.customer, "restarted")
        answer = payments.fence(gateway, payment)
        with operation.owned():
            operation.note(payments.PaymentEvent.RECONCILED, payment_id=payment.public_id, gateway_says=answer.status)
            ended = payments.settle(payment, answer, operation.note)
            operation.apply(Complete(payments.answer_for(ended, ApiPaymentResponder())))
    except LeaseLost:
        return skipped  # a client's retry took it over meanwhile: it will finish it
    return Reconciled(scope.key, scope.endpoint, scope.customer, ended.status, payment.public_id, ended.charge_id)
