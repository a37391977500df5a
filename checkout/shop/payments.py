"""POST /api/payments, the articles' own request: a payment for the client's ``orderId``, in phases.

The payment row's INSERT alone decides a race (one per key; one pending or succeeded per order reference); the
gateway is called with no transaction open, always under the payment's gateway key, so it never charges twice.
Design: docs/design.md#checkoutshoppaymentspy-the-payment-request-in-phases
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, ClassVar, Protocol

import sqlalchemy as sa

from checkout.database import insert_ignoring_conflicts, public_id, reading, table_of, utcnow
from checkout.extensions import db, once
from checkout.gateway import Gateway
from checkout.idempotency import (
    Complete,
    LeaseLost,
    MoveTo,
    Operation,
    Phase,
    RecordView,
    Refuse,
    Step,
    StoredResponse,
    key_reused,
)
from checkout.shop import schemas
from checkout.shop.answers import CARD_DECLINED, IN_PROGRESS, PAYMENT_ABANDONED, ProblemKind
from checkout.shop.models import (
    PAYMENT_DECLINED,
    PAYMENT_FAILED,
    PAYMENT_HOLDS_ORDER,
    PAYMENT_PENDING,
    PAYMENT_SUCCEEDED,
    Payment,
)
from checkout.shop.payment import (
    FINISHED_MEANWHILE,
    GatewayAnswer,
    GatewayCall,
    PaymentEvent,
    Phases,
    charge_once,
    gateway_key_for,
)

API_PAYMENTS = "POST /api/payments"
PAYMENT_CREATED = "payment_created"
FENCING_HOLDER = "fencing_holder"  # a recovery point: ending another key's payment whose worker died
PAYMENT_PREFIX = "pay"

payments = table_of(Payment)


def is_payment_id(reference: str | None) -> bool:
    """Whether a reference (a record's, a charge's) names one of these payments rather than an order."""
    return bool(reference) and str(reference).startswith(PAYMENT_PREFIX + "_")


# --- payments as plain values ------------------------------------------------------------


@dataclass(frozen=True)
class PaymentView:
    id: int
    public_id: str
    customer_id: int
    idempotency_key: str
    order_ref: str
    gateway_key: str
    amount: int
    currency: str
    status: str
    card_last4: str
    charge_id: str | None
    created_at: datetime

    @property
    def location(self) -> str:
        return f"/api/payments/{self.public_id}"


_COLUMNS = [
    payments.c.id,
    payments.c.public_id,
    payments.c.customer_id,
    payments.c.idempotency_key,
    payments.c.order_ref,
    payments.c.gateway_key,
    payments.c.amount,
    payments.c.currency,
    payments.c.status,
    payments.c.card_last4,
    payments.c.charge_id,
    payments.c.created_at,
]
_END_PENDING = (
    sa.update(payments)
    .where(payments.c.id == sa.bindparam("_id"), payments.c.status == PAYMENT_PENDING)
    .returning(*_COLUMNS)
)


def _view(row: Any) -> PaymentView:
    return PaymentView(**{column.name: row._mapping[column] for column in _COLUMNS})


def load(where: sa.ColumnElement[bool]) -> PaymentView | None:
    row = db.session.execute(sa.select(*_COLUMNS).where(where)).first()
    return _view(row) if row is not None else None


def by_public_id(payment_public_id: str) -> PaymentView | None:
    return load(payments.c.public_id == payment_public_id)


def gateway_key_of(payment_public_id: str) -> str | None:
    return db.session.scalar(sa.select(payments.c.gateway_key).where(payments.c.public_id == payment_public_id))


def of_customer(customer_id: int, payment_public_id: str) -> PaymentView | None:
    """One of this customer's payments (None for anyone else's: the same answer as for no payment)."""
    return load(sa.and_(payments.c.public_id == payment_public_id, payments.c.customer_id == customer_id))


@dataclass(frozen=True)
class PaymentRequest:
    customer_id: int
    idempotency_key: str
    payment: schemas.PaymentRequest


def insert_pending(request: PaymentRequest) -> PaymentView | None:
    """Insert the pending payment; None if a unique constraint refused it (this key's, or the order's)."""
    payment_id = public_id(PAYMENT_PREFIX)
    now = utcnow()
    row = db.session.execute(
        insert_ignoring_conflicts(payments, db.session, returning=_COLUMNS),
        {
            "public_id": payment_id,
            "customer_id": request.customer_id,
            "idempotency_key": request.idempotency_key,
            "order_ref": request.payment.order_ref,
            "gateway_key": gateway_key_for(payment_id),
            "amount": request.payment.amount,
            "currency": request.payment.currency,
            "status": PAYMENT_PENDING,
            "card_last4": request.payment.card_number[-4:],
            "created_at": now,
            "updated_at": now,
        },
    ).first()
    return _view(row) if row is not None else None


def end_pending(payment: PaymentView, status: str, charge_id: str | None) -> PaymentView | None:
    """Move a pending payment to its outcome; None if it was no longer pending (someone else ended it first)."""
    row = db.session.execute(
        _END_PENDING, {"_id": payment.id, "status": status, "charge_id": charge_id, "updated_at": utcnow()}
    ).first()
    return replace(payment, status=row.status, charge_id=row.charge_id) if row is not None else None


_ENDS = {"succeeded": PAYMENT_SUCCEEDED, "declined": PAYMENT_DECLINED, "voided": PAYMENT_FAILED}
_ENDED = {
    PAYMENT_SUCCEEDED: PaymentEvent.CHARGED,
    PAYMENT_DECLINED: PaymentEvent.DECLINED,
    PAYMENT_FAILED: PaymentEvent.VOIDED,
}


def settle(payment: PaymentView, answer: GatewayAnswer, note: Callable[..., None]) -> PaymentView:
    """End a pending payment as the gateway answered, in the current unit of work; the payment as it is now.

    The first to know (the worker, reconcile, the webhook) ends it; the others change nothing.
    """
    status = _ENDS.get(answer.status)
    charge_id = answer.charge_id if status != PAYMENT_FAILED else None
    ended = end_pending(payment, status, charge_id) if status else None
    if ended is None:
        now = by_public_id(payment.public_id)  # already final: it is what it is
        assert now is not None
        return now
    note(_ENDED[ended.status], payment_id=ended.public_id, charge_id=ended.charge_id)
    return ended


# --- answers ---------------------------------------------------------------------------------


class PaymentResponder(Protocol):
    def paid(self, payment: PaymentView) -> StoredResponse: ...

    def declined(self, payment: PaymentView) -> StoredResponse: ...

    def abandoned(self, payment: PaymentView) -> StoredResponse: ...

    def already_paid(self, payment: PaymentView) -> StoredResponse: ...

    def paying_elsewhere(self, payment: PaymentView | None, retry_after: int = 1) -> StoredResponse: ...

    def in_progress(self, payment: PaymentView) -> StoredResponse: ...

    def key_reused(self) -> StoredResponse: ...


def answer_for(payment: PaymentView, respond: PaymentResponder) -> StoredResponse:
    """The endpoint's answer for a payment that already has its outcome."""
    if payment.status == PAYMENT_SUCCEEDED:
        return respond.paid(payment)
    if payment.status == PAYMENT_DECLINED:
        return respond.declined(payment)
    if payment.status == PAYMENT_FAILED:
        return respond.abandoned(payment)
    raise ValueError(f"payment {payment.public_id} has no outcome yet ({payment.status})")


ALREADY_PAID = ProblemKind(409, "Order already paid", "order-already-paid")
PAYING_ELSEWHERE = ProblemKind(409, "Order payment in progress", "order-payment-in-progress", come_back=True)


def _names(payment: PaymentView) -> dict[str, str]:
    return {"payment_id": payment.public_id, "order_id": payment.order_ref}


@dataclass(frozen=True)
class ApiPaymentResponder:
    """POST /api/payments: JSON, stored byte for byte and replayed as it is.

    Problems name the payment as ``payment_id`` (as the 409 and 503 of the engine do) and the
    client's order reference as ``order_id``; ``order-already-paid`` also gives the existing
    payment as ``id``, the field a client reads from the payment itself. A 409 names the request's
    ``idempotency_key``, as the engine's do.
    """

    key: str | None = None

    def paid(self, payment: PaymentView) -> StoredResponse:
        return StoredResponse(
            201,
            {"Content-Type": "application/json", "Location": payment.location},
            schemas.Payment.of(payment).to_bytes(),
        )

    def declined(self, payment: PaymentView) -> StoredResponse:
        detail = "The card was declined. Nothing was charged; pay this order again with a new Idempotency-Key."
        return CARD_DECLINED.stored(detail, **_names(payment))

    def abandoned(self, payment: PaymentView) -> StoredResponse:
        detail = (
            "This payment was abandoned before the gateway charged it, and nothing was charged. "
            "Pay this order again with a new Idempotency-Key."
        )
        return PAYMENT_ABANDONED.stored(detail, **_names(payment))

    def already_paid(self, payment: PaymentView) -> StoredResponse:
        detail = f"Order {payment.order_ref} is already paid by payment {payment.public_id}: nothing was charged."
        return ALREADY_PAID.stored(detail, id=payment.public_id, **_names(payment), idempotency_key=self.key)

    def paying_elsewhere(self, payment: PaymentView | None, retry_after: int = 1) -> StoredResponse:
        detail = (
            "Another request, with another Idempotency-Key, is paying this order right now. Nothing was "
            "charged under this key; retry later with the same key to learn whether the order got paid."
        )
        names = _names(payment) if payment else {}
        return PAYING_ELSEWHERE.stored(detail, retry_after, **names, idempotency_key=self.key)

    def in_progress(self, payment: PaymentView) -> StoredResponse:
        detail = "A request with this Idempotency-Key is still paying this order; retry later."
        return IN_PROGRESS.stored(detail, **_names(payment), idempotency_key=self.key)

    def key_reused(self) -> StoredResponse:
        return key_reused()


# --- the gateway, always under the payment's own key ---------------------------------------------


def charge(gateway: Gateway, payment: PaymentView, card_number: str) -> GatewayAnswer:
    """Ask the gateway to charge (no transaction may be open): the payment's own gateway key, every time."""
    call = GatewayCall(payment.gateway_key, payment.public_id)
    return charge_once(gateway, call, payment.amount, payment.currency, card_number, payment_id=payment.public_id)


def fence(gateway: Gateway, payment: PaymentView) -> GatewayAnswer:
    """Void the payment's gateway key unless a charge already stands under it (reconcile, before it decides)."""
    return GatewayAnswer.of(gateway.void(gateway_key=payment.gateway_key, reference=payment.public_id))


# --- another key's payment holds the order -------------------------------------------------------


def _holders_record(operation: Operation, holder: PaymentView) -> RecordView | None:
    return operation.store.find(replace(operation.scope, key=holder.idempotency_key))


def _holder_answers_in(view: RecordView | None, gateway: Gateway) -> int:
    """Seconds until the other key's call must have ended, bounded by its lease. Its card is not known here
    (this request's may differ), so not its expected time: the longest the shop waits for the gateway."""
    if view is None or not view.lease_live:
        return 1  # let go (its answer was lost): its key's retry, or reconcile, finishes it
    return view.retry_after(utcnow(), gateway.timeout_seconds)


def _holder_died(view: RecordView | None) -> bool:
    """Its worker held a lease and the lease ran out: it died or hung at the gateway (a released lease, an
    unknown outcome its client was told to retry, is that client's to finish)."""
    return view is not None and not view.completed and view.locked_until is not None and not view.lease_live


def end_abandoned(operation: Operation, gateway: Gateway) -> PaymentView | None:
    """A payment whose worker is gone, its record taken over: fence its gateway key (a charge that stands is
    final; else nothing can charge under it any more), then end it as the gateway says and store its answer.
    Reconcile does this, and so does another key that finds the order held by it. None: no payment was made."""
    with reading():
        payment = by_public_id(operation.reference) if operation.reference else None
    if payment is None:
        operation.discard("abandoned before a payment existed")
        return None
    answer = fence(gateway, payment)
    with operation.owned():
        operation.note(PaymentEvent.RECONCILED, payment_id=payment.public_id, gateway_says=answer.status)
        ended = settle(payment, answer, operation.note)
        operation.apply(Complete(answer_for(ended, ApiPaymentResponder())))
    return ended


def _holding(request: PaymentRequest) -> sa.ColumnElement[bool]:
    """The payment that holds the request's order (pending or succeeded): at most one, by a unique index."""
    return sa.and_(
        payments.c.customer_id == request.customer_id,
        payments.c.order_ref == request.payment.order_ref,
        payments.c.status.in_(PAYMENT_HOLDS_ORDER),
    )


# --- the phases ------------------------------------------------------------------------------

# Of two claims racing for one order, the loser may find the winner ended (declined) between its
# refused INSERT and its look: it tries again, a few times at most.
INSERT_ATTEMPTS = 3


@dataclass
class PlacePayment(Phases[PaymentView]):
    """One payment for the client's order reference: ``started`` → ``payment_created`` → finished."""

    created: ClassVar[str] = PAYMENT_CREATED
    request: PaymentRequest
    respond: PaymentResponder
    gateway: Gateway

    def phases(self) -> dict[str, Phase]:
        # started -> fencing_holder (only when a dead worker's payment holds the order) -> started's rules again
        # (which may still refuse: this key made nothing yet, so its record goes and the key stays usable)
        return {**super().phases(), FENCING_HOLDER: Phase(call=self.fence_holder, commit=self.create)}

    # -- started: inside the claim's transaction ------------------------------------------

    def create(self, operation: Operation, _no_call: None) -> Step:
        request = self.request
        for _attempt in range(INSERT_ATTEMPTS):
            created = insert_pending(request)
            if created is not None:
                operation.reference = created.public_id
                operation.note(PaymentEvent.PAYMENT_CREATED, payment_id=created.public_id, order_ref=created.order_ref)
                # Written in the transaction that precedes the call: the worker named here makes it next.
                operation.note(
                    PaymentEvent.GATEWAY_CALLED, payment_id=created.public_id, gateway_key=created.gateway_key
                )
                self.keep(operation, created)
                return MoveTo(PAYMENT_CREATED)
            mine = load(
                sa.and_(
                    payments.c.customer_id == request.customer_id,
                    payments.c.idempotency_key == request.idempotency_key,
                )
            )
            if mine is not None:
                return self._made_by_this_key(operation, mine)
            holder = load(_holding(request))
            if holder is None:
                continue  # the holder was declined since our INSERT: the order is free again
            if holder.status == PAYMENT_SUCCEEDED:
                # Final: the order is paid, and stays paid. Stored under this key and replayed.
                operation.reference = holder.public_id
                operation.note(PaymentEvent.ALREADY_PAID, payment_id=holder.public_id, order_ref=holder.order_ref)
                return Complete(self.respond.already_paid(holder))
            record = _holders_record(operation, holder)
            if _holder_died(record):
                # Its worker died at the gateway: end that payment first, as reconcile would, then look again.
                operation.note(PaymentEvent.HOLDER_DIED, payment_id=holder.public_id)
                return MoveTo(FENCING_HOLDER)
            # Another key is paying this order right now. Not stored: if it is declined, this key may pay.
            answers_in = _holder_answers_in(record, self.gateway)
            raise Refuse(self.respond.paying_elsewhere(holder, answers_in), reference=holder.public_id)
        raise Refuse(self.respond.paying_elsewhere(None))  # the order changed hands under us, again and again

    # -- fencing_holder: a dead worker's payment of the same order, ended with no transaction open -----

    def fence_holder(self, operation: Operation) -> None:
        """Take the dead worker's record over, as a retry of its key would, and end its payment. Then ``create``
        runs again: the order is paid (its charge stood), or free, or held by a live request once more."""
        with reading():
            holder = load(_holding(self.request))
            record = _holders_record(operation, holder) if holder is not None else None
        if record is None or not _holder_died(record):
            return  # ended meanwhile, or taken over by someone who ends it
        taken = once.take_over(record)
        if taken is None:
            return
        try:
            end_abandoned(taken, self.gateway)
        except LeaseLost:
            pass  # another request took it over meanwhile: it ends it
        except BaseException:
            taken.release("error")  # not left held by nobody for a whole lease
            raise

    def _made_by_this_key(self, operation: Operation, mine: PaymentView) -> Step:
        """The payment this key made before its record was purged: its answer (a late retry)."""
        asked = self.request.payment
        if (mine.order_ref, mine.amount, mine.currency) != (asked.order_ref, asked.amount, asked.currency):
            raise Refuse(self.respond.key_reused())
        operation.reference = mine.public_id
        if mine.status == PAYMENT_PENDING:
            raise Refuse(self.respond.in_progress(mine), reference=mine.public_id)
        operation.note(PaymentEvent.ALREADY_FINAL, payment_id=mine.public_id, status=mine.status)
        return Complete(answer_for(mine, self.respond))

    # -- payment_created: the gateway, with no transaction open, then one transaction ---------

    def load(self, public_id: str) -> PaymentView | None:
        return by_public_id(public_id)

    def call(self, operation: Operation) -> GatewayAnswer:
        payment = self.made(operation)
        if payment.status != PAYMENT_PENDING:
            return FINISHED_MEANWHILE  # finished meanwhile (reconcile, or the gateway's webhook)
        return charge(self.gateway, payment, self.request.payment.card_number)

    def record(self, operation: Operation, answer: GatewayAnswer) -> Step:
        return Complete(answer_for(settle(self.made(operation), answer, operation.note), self.respond))
