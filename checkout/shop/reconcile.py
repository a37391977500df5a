"""Finish operations nobody is working on any more, by asking the gateway.

It takes the lease over and fences the gateway key before deciding, so a stalled worker that wakes up later cannot
charge behind its back (a refund needs no fence). The client sees the outcome on its next retry with the same key.
Design: docs/design.md#checkoutshopreconcilepy-finishing-abandoned-operations
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flask import current_app

from checkout.database import reading, writing
from checkout.extensions import once
from checkout.gateway import Gateway
from checkout.idempotency import Complete, Event, LeaseLost, RecordView, RetryLater, Scope, Settings
from checkout.metrics import count_housekeeping
from checkout.shop import orders, payments
from checkout.shop.compensation import compensate_all, compensation_key
from checkout.shop.orders import OrderView
from checkout.shop.payment import RESPONDERS, GatewayAnswer, PaymentEvent, finish
from checkout.shop.payments import API_PAYMENTS
from checkout.shop.refunds import (
    API_REFUNDS,
    BROWSER_REFUNDS,
    ApiRefundResponder,
    BrowserRefundResponder,
    RefundResponder,
    mark_refunded,
)
from checkout.shop.refunds import call_gateway as call_refund


@dataclass(frozen=True)
class Reconciled:
    key: str
    endpoint: str
    customer: str
    # paid, declined, failed, refunded, succeeded (a payment), waiting, restarted, skipped; for an orphan charge
    # (endpoint "compensation"): compensated, waiting or refused
    outcome: str
    order_id: str | None = None
    charge_id: str | None = None

    @classmethod
    def of(cls, scope: Scope, outcome: str, order_id: str | None = None, charge_id: str | None = None) -> Reconciled:
        return cls(scope.key, scope.endpoint, scope.customer, outcome, order_id, charge_id)

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


def reconcile_one(view: RecordView, gateway: Gateway) -> Reconciled:
    if view.scope.endpoint in REFUND_RESPONDERS:
        return _reconcile_refund(view, gateway)
    if view.scope.endpoint == API_PAYMENTS:
        return _reconcile_payment(view, gateway)
    scope = view.scope
    skipped = Reconciled.of(scope, "skipped")
    respond = RESPONDERS.get(scope.endpoint)
    if respond is None:
        return skipped  # an endpoint this command does not know
    operation = once.take_over(view, by=Event.RECONCILE_STARTED)
    if operation is None:
        return skipped  # a client's retry got there first: it will finish it
    try:
        order = _order_of(operation.reference) if operation.reference else None
        if order is None:
            operation.discard("abandoned before an order existed")
            return Reconciled.of(scope, "restarted")
        answer = fence(gateway, order)
        with operation.owned():
            operation.note(PaymentEvent.RECONCILED, order_id=order.public_id, gateway_says=answer.status)
            operation.apply(finish(operation, order, answer, respond))
        ended = _order_of(order.public_id)
        assert ended is not None
        outcome, charge_id = ended.status, ended.charge_id
    except LeaseLost:
        return skipped  # a client's retry took it over meanwhile: it will finish it
    return Reconciled.of(scope, outcome, order.public_id, charge_id)


def fence(gateway: Gateway, order: OrderView) -> GatewayAnswer:
    """Void the order's gateway key unless a charge already stands under it: whichever stands is final,
    so a stalled worker that wakes up later cannot charge behind reconcile's back."""
    return GatewayAnswer.of(gateway.void(gateway_key=order.gateway_key, reference=order.public_id))


# Finishers of abandoned work whose records live outside this database, registered by whoever keeps
# them there (the lab's Redis store): app.extensions[RECONCILERS], each called after the records' own.
RECONCILERS = "checkout.reconcilers"
Reconciler = Callable[[Gateway, Settings], list["Reconciled"]]


def reconcile(gateway: Gateway) -> list[Reconciled]:
    """Finish the abandoned operations, then compensate what should not stand: a charge for an order that ended
    unpaid is refunded once (checkout.shop.compensation)."""
    settings = once.settings()
    with reading():
        stale = once.store.abandoned(settings)
    done = [reconcile_one(view, gateway) for view in stale]
    for finish_elsewhere in current_app.extensions.get(RECONCILERS, ()):
        done.extend(finish_elsewhere(gateway, settings))
    for compensated in compensate_all(gateway):
        orphan = compensated.orphan
        key = compensation_key(orphan.charge_id)
        done.append(Reconciled(key, "compensation", "", compensated.outcome, orphan.order_id, orphan.charge_id))
    if done:  # /metrics counts what each run did, whichever process ran it (a run that dies counts nothing)
        with writing():  # (a cron run with nothing to do writes nothing)
            count_housekeeping("reconcile", [r.outcome for r in done if r.endpoint != "compensation"])
            count_housekeeping("compensate", [r.outcome for r in done if r.endpoint == "compensation"])
    return done


REFUND_RESPONDERS: dict[str, RefundResponder] = {
    API_REFUNDS: ApiRefundResponder(),
    BROWSER_REFUNDS: BrowserRefundResponder(),
}


def _reconcile_refund(view: RecordView, gateway: Gateway) -> Reconciled:
    scope = view.scope
    skipped = Reconciled.of(scope, "skipped")
    operation = once.take_over(view, by=Event.RECONCILE_STARTED)
    if operation is None:
        return skipped
    try:
        with reading():
            refund = orders.refund_by_public_id(operation.reference) if operation.reference else None
        if refund is None:
            operation.discard("abandoned before a refund existed")
            return Reconciled.of(scope, "restarted")
        try:
            answer = call_refund(gateway, refund)
        except RetryLater as later:
            operation.release(later.reason, later.event, **later.detail)
            return Reconciled.of(scope, "waiting", refund.order_public_id)
        with operation.owned():
            mark_refunded(refund, answer.id)
            done = orders.refund_by_public_id(refund.public_id)
            assert done is not None
            operation.apply(Complete(REFUND_RESPONDERS[scope.endpoint].refunded(done)))
    except LeaseLost:
        return skipped
    return Reconciled.of(scope, "refunded", refund.order_public_id)


def _reconcile_payment(view: RecordView, gateway: Gateway) -> Reconciled:
    """Fence an abandoned payment's gateway key, then end it as the gateway says (as for an order)."""
    scope = view.scope
    operation = once.take_over(view, by=Event.RECONCILE_STARTED)
    if operation is None:
        return Reconciled.of(scope, "skipped")  # a client's retry got there first: it will finish it
    try:
        ended = payments.end_abandoned(operation, gateway)
    except LeaseLost:
        return Reconciled.of(scope, "skipped")  # a client's retry took it over meanwhile: it will finish it
    if ended is None:
        return Reconciled.of(scope, "restarted")
    return Reconciled.of(scope, ended.status, ended.public_id, ended.charge_id)
