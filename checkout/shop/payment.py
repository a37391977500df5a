"""Placing an order, as phases with recovery points (the shape of rocket-rides-atomic).

``started`` inserts the order and takes its stock in the claim's transaction; ``order_created`` calls the gateway
with no transaction open and a key derived from the order, so calling it again can never charge twice.
Design: docs/design.md#checkoutshoppaymentpy-placing-an-order-in-phases
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import sqlalchemy as sa
from flask import current_app

from checkout.database import public_id, reading
from checkout.gateway import CardDeclined, Charge, Gateway, GatewayTimeout, GatewayUnavailable, KeyVoided
from checkout.i18n import N_
from checkout.idempotency import (
    STARTED,
    Complete,
    MoveTo,
    Operation,
    Phase,
    Pipeline,
    Refuse,
    RetryLater,
    Step,
    StoredResponse,
    key_reused,
)
from checkout.shop import carts, loyalty, orders
from checkout.shop.answers import ApiResponder, BrowserResponder, Responder
from checkout.shop.models import DECLINED, FAILED, PAID, PENDING, WAS_PAID
from checkout.shop.orders import Line, OrderView, price, total_of
from checkout.shop.schemas import RequestedLine

API_ENDPOINT = "POST /api/orders"
BROWSER_ENDPOINT = "POST /checkout"

ORDER_CREATED = "order_created"
Made = TypeVar("Made")  # what a payment's first phase makes: an order, a payment, a refund


class PaymentEvent(enum.StrEnum):
    """What a payment (an order's, or POST /api/payments') records in the audit trail; the engine records the
    rest. One vocabulary, so the gateway-fault counters count both."""

    ORDER_CREATED = "order_created"
    PAYMENT_CREATED = "payment_created"
    GATEWAY_CALLED = "gateway_called"
    CHARGED = "charged"
    DECLINED = "declined"
    VOIDED = "voided"
    GATEWAY_UNAVAILABLE = "gateway_unavailable"
    ANSWER_LOST = "answer_lost"
    ALREADY_FINAL = "already_final"
    ORDER_FOUND = "order_found"  # a claim found its key's order still pending (its record was lost), and pays it on
    OUT_OF_STOCK = "out_of_stock"
    ALREADY_PAID = "already_paid"  # POST /api/payments: the client's order is paid already, by another key
    HOLDER_DIED = "holder_died"  # POST /api/payments: another key's payment holds the order, its worker is gone
    RECONCILED = "reconciled"


@dataclass(frozen=True)
class CartVersion:
    """The browser pays for one version of its cart, at the total its form showed."""

    cart_id: int
    version: int
    expected_total_cents: int


@dataclass(frozen=True)
class OrderRequest:
    customer_id: int
    idempotency_key: str
    email: str
    card_number: str  # digits only; never stored, only handed to the gateway
    items: tuple[RequestedLine, ...] = ()  # the API's lines as sent, priced inside the claim
    cart: CartVersion | None = None  # a browser pays for one version of its cart


@dataclass(frozen=True)
class GatewayAnswer:
    """What the gateway said about the order's gateway key: succeeded, declined or voided."""

    status: str
    charge_id: str | None = None

    @classmethod
    def of(cls, charge: Charge) -> GatewayAnswer:
        return cls(charge.status, charge.id)


FINISHED_MEANWHILE = GatewayAnswer("already_final")  # no call made: the outcome was already final


def gateway_key_for(order_public_id: str) -> str:
    return f"charge-{order_public_id}"


# --- the app's configured collaborator ------------------------------------------------------


def gateway() -> Gateway:
    gw: Gateway = current_app.extensions["checkout.gateway"]
    return gw


# --- the pipeline: one way to take a payment, its parts as parameters ----------------------


@dataclass(frozen=True)
class GatewayCall:
    """What the gateway is asked under: its idempotency key, and the reference it records."""

    key: str
    reference: str


class Provider(Protocol):
    """Who takes the money: asked for an order under a GatewayCall; RetryLater when the outcome is unknown."""

    def charge(self, operation: Operation, order: OrderView, call: GatewayCall, card_number: str) -> GatewayAnswer: ...


def from_the_order(order: OrderView) -> GatewayCall:
    """Derived from the order, made once: the same on every retry, resumed call and reconcile run."""
    return GatewayCall(order.gateway_key, order.public_id)


def the_clients_key(key: str) -> str:
    """The order is unique per (customer, key): the last layer, which holds whatever the store forgets."""
    return key


class KeyedGateway:
    """The shop's provider: the gateway charges a key once, whoever asks and however often."""

    def charge(self, operation: Operation, order: OrderView, call: GatewayCall, card_number: str) -> GatewayAnswer:
        return charge_once(gateway(), call, order.total_cents, order.currency, card_number, order_id=order.public_id)


def charge_once(
    keyed: Gateway, call: GatewayCall, amount_cents: int, currency: str, card_number: str, **detail: str
) -> GatewayAnswer:
    """The keyed gateway asked under the call's key (no transaction may be open): it charges a key once."""
    charge = functools.partial(keyed.charge, gateway_key=call.key, amount_cents=amount_cents, currency=currency)
    return ask(lambda: charge(card_number=card_number, reference=call.reference), **detail)


def ask(charge: Callable[[], Charge], **detail: str) -> GatewayAnswer:
    """A provider's answer; RetryLater when it cannot be known yet (down: nothing charged; timed out:
    maybe). ``detail`` names what is being paid, for the audit trail (``order_id=``, ``payment_id=``)."""
    try:
        return GatewayAnswer.of(charge())
    except CardDeclined as declined:
        return GatewayAnswer.of(declined.charge)
    except KeyVoided:
        return GatewayAnswer("voided")
    except GatewayUnavailable as unavailable:
        unknown = N_("the payment gateway is unavailable; nothing was charged")
        raise RetryLater(unknown, 1, event=PaymentEvent.GATEWAY_UNAVAILABLE, **detail) from unavailable
    except GatewayTimeout as timeout:
        unknown = N_("the payment gateway did not answer in time")
        raise RetryLater(unknown, 1, event=PaymentEvent.ANSWER_LOST, **detail) from timeout


@dataclass(frozen=True)
class PaymentPipeline(Pipeline):
    """One way to take a payment: the edge's rules (its store, scope and fingerprint) and who is charged under
    which key. The shop's is ``SAFE``; each of the lab's variants is ``SAFE`` with one part swapped
    (checkout/lab/mistakes/twin.py), so a mistake is a diff of the real code."""

    gateway_call_of: Callable[[OrderView], GatewayCall] = from_the_order
    order_key_of: Callable[[str], str] = the_clients_key
    provider: Provider = field(default_factory=KeyedGateway)


SAFE = PaymentPipeline(API_ENDPOINT)  # POST /api/orders
BROWSER = PaymentPipeline(BROWSER_ENDPOINT)  # POST /checkout: the same parts


def find_order(customer_id: int, idempotency_key: str) -> OrderView | None:
    return orders.load(
        sa.and_(orders.orders.c.customer_id == customer_id, orders.orders.c.idempotency_key == idempotency_key)
    )


class Phases(Generic[Made]):
    """The two phases of every payment and refund here, in recovery-point order: ``started`` makes a row inside
    the claim's transaction (``create``); ``created`` calls the gateway with no transaction open (``call``), then
    records its answer in one (``record``). A retry that resumes at ``created`` reads back the row its record
    names (``made``) before it calls out again, under the row's own gateway key."""

    created: ClassVar[str]  # the recovery point between the two phases
    _kept: tuple[str, Made] | None = None  # what the operation holding it made, read in this attempt

    def phases(self) -> dict[str, Phase]:
        """What the idempotency engine runs."""
        return {STARTED: Phase(commit=self.create), self.created: Phase(call=self.call, commit=self.record)}

    def create(self, operation: Operation, _no_call: None) -> Step:
        raise NotImplementedError

    def call(self, operation: Operation) -> object:
        raise NotImplementedError

    def record(self, operation: Operation, answer: Any) -> Step:
        raise NotImplementedError

    def load(self, public_id: str) -> Made | None:
        raise NotImplementedError

    def keep(self, operation: Operation, made: Made) -> Made:
        self._kept = (operation.owner, made)
        return made

    def made(self, operation: Operation) -> Made:
        """What the operation made: as this attempt wrote it, else read back (a takeover, or this request's phases
        carried on after a 202, reads it again: it may have changed meanwhile)."""
        if (self._kept is None or self._kept[0] != operation.owner) and operation.reference is not None:
            with reading():  # end the read before the gateway call
                found = self.load(operation.reference)
            self._kept = (operation.owner, found) if found is not None else None
        if self._kept is None:
            raise RuntimeError(f"recovery point {operation.recovery_point} but nothing was made")
        return self._kept[1]


@dataclass
class PlaceOrder(Phases[OrderView]):
    """One order paid: ``started`` → ``order_created`` → finished."""

    created: ClassVar[str] = ORDER_CREATED
    request: OrderRequest
    respond: Responder
    pipeline: PaymentPipeline

    # -- started: inside the claim's transaction ------------------------------------

    def _lines(self) -> tuple[tuple[Line, ...], str]:
        """What is being paid for, at today's prices, and its currency (read inside the claim)."""
        cart = self.request.cart
        if cart is None:
            priced, errors = price(self.request.items, self.request.customer_id)
            if priced is None:
                raise Refuse(self.respond.invalid(errors))  # nothing is stored: the client may fix the body
            return priced.lines, priced.currency
        lines = carts.lines_of_version(cart.cart_id, cart.version)
        if lines is None:
            raise Refuse(self.respond.out_of_date(N_("Your cart changed after this page was shown.")))
        if not lines:
            raise Refuse(self.respond.out_of_date(N_("Your cart is empty.")))
        if total_of(lines) != cart.expected_total_cents:
            raise Refuse(self.respond.out_of_date(N_("A price changed after this page was shown.")))
        return lines, carts.CURRENCY

    def create(self, operation: Operation, _no_call: None) -> Step:
        lines, currency = self._lines()
        # The order first, its stock second. The orders' own unique constraints are asked before the
        # shelf is: a late retry (its key's record purged, or forgotten by Redis) or a second key for
        # this cart version finds the order that exists and gets its answer, even when that order took
        # the last item. Taking stock first would tell it "out of stock" for the stock its own order holds.
        order, created = _insert_order(self.request, self.pipeline, lines, currency)
        if not created:
            operation.reference = order.public_id
            # Found by its key (the record was purged or lost) or by its cart version (a second tab, a forged form).
            asked = _asked_for(order, self.request)
            if self.request.cart is None and not asked:
                # The API finds an order by its key alone: the key's record is gone, and this is not the body
                # that key placed. 422, as the record would have said; nothing stored, so the first body, sent
                # again, still gets its order.
                raise Refuse(key_reused())
            if order.status == PENDING:
                # A store in this database claims in the transaction that made the order: its record
                # stands, and whoever holds it is paying. Only a store outside it can lose the record of a
                # pending order (Redis forgot it, its claimant died between the two writes).
                if self.pipeline.store is None or self.pipeline.store.joins_transaction or not asked:
                    # respond-async may point at this key's own order for this very body, never at another one
                    raise Refuse(self.respond.in_progress(order), reference=order.public_id if asked else None)
                # This key's own order, for this very body, its record gone: pay it on, under its own
                # gateway key (charged once), as a resumed payment (a provider without keys looks first).
                operation.note(PaymentEvent.ORDER_FOUND, order_id=order.public_id)
                operation.resumed = True
                self.keep(operation, order)
                return MoveTo(ORDER_CREATED)
            operation.note(PaymentEvent.ALREADY_FINAL, order_id=order.public_id, status=order.status)
            return Complete(answer_for(order, self.respond))
        short = orders.take_stock(lines)
        if short:
            orders.withdraw(order)  # inserted a moment ago in this transaction: as if it never was
            # Final under this key, like a decline: stored and replayed. (A browser's cart version
            # moves on, so fixing the cart gets a new key.)
            operation.note(PaymentEvent.OUT_OF_STOCK, skus=short)
            if self.request.cart is not None:
                carts.retire_version(self.request.cart.cart_id, self.request.cart.version)
            return Complete(self.respond.out_of_stock(short))
        operation.reference = order.public_id
        operation.note(PaymentEvent.ORDER_CREATED, order_id=order.public_id)
        # Written in the transaction that precedes the call: the worker named here makes it next.
        operation.note(PaymentEvent.GATEWAY_CALLED, order_id=order.public_id, gateway_key=order.gateway_key)
        self.keep(operation, order)
        return MoveTo(ORDER_CREATED)

    # -- order_created: the gateway, with no transaction open, then one transaction ---

    def load(self, public_id: str) -> OrderView | None:
        return orders.by_public_id(public_id)

    def call(self, operation: Operation) -> GatewayAnswer:
        order = self.made(operation)
        if order.status != PENDING:
            return FINISHED_MEANWHILE  # finished meanwhile (reconcile, or the gateway's webhook)
        call = self.pipeline.gateway_call_of(order)
        return self.pipeline.provider.charge(operation, order, call, self.request.card_number)

    def record(self, operation: Operation, answer: GatewayAnswer) -> Step:
        return finish(operation, self.made(operation), answer, self.respond)


def _insert_order(
    request: OrderRequest, pipeline: PaymentPipeline, lines: tuple[Line, ...], currency: str
) -> tuple[OrderView, bool]:
    """Insert the order; if its key or its cart version already has one, return that one instead."""
    order_id = public_id("ord")
    key = pipeline.order_key_of(request.idempotency_key)
    created = orders.insert(
        {
            "public_id": order_id,
            "gateway_key": gateway_key_for(order_id),
            "customer_id": request.customer_id,
            "idempotency_key": key,
            "cart_id": request.cart.cart_id if request.cart else None,
            "cart_version": request.cart.version if request.cart else None,
            "email": request.email,
            "card_last4": request.card_number[-4:],
            "total_cents": total_of(lines),
            "currency": currency,
        },
        lines,
    )
    if created is not None:
        orders.tell(orders.order_placed, pipeline=pipeline, order_id=created.id)
        return created, True
    existing = find_order(request.customer_id, key)
    if existing is None and request.cart is not None:
        existing = orders.load(
            sa.and_(
                orders.orders.c.cart_id == request.cart.cart_id, orders.orders.c.cart_version == request.cart.version
            )
        )
    if existing is None:
        raise RuntimeError("an order's unique constraint refused the insert, but no such order exists")
    return existing, False


def _asked_for(order: OrderView, request: OrderRequest) -> bool:
    """Whether an order is the one this API request's key placed for this very body (as far as the order keeps
    it: the card's last four digits, not its number)."""
    asked = sorted((item.sku, item.quantity) for item in request.items)
    placed = sorted((line.sku, line.quantity) for line in order.items)
    return (
        request.cart is None
        and order.idempotency_key == request.idempotency_key
        and (order.email, order.card_last4, placed) == (request.email, request.card_number[-4:], asked)
    )


def finish(operation: Operation, order: OrderView, answer: GatewayAnswer, respond: Responder) -> Step:
    """Record the gateway's answer on the order and complete the operation (inside its owned transaction)."""
    return Complete(answer_for(settle(order, answer, operation.note), respond))


_ENDS = {"succeeded": PAID, "declined": DECLINED, "voided": FAILED}
_ENDED = {PAID: PaymentEvent.CHARGED, DECLINED: PaymentEvent.DECLINED, FAILED: PaymentEvent.VOIDED}


def end_order(order: OrderView, status: str, charge_id: str | None) -> OrderView | None:
    """Move a pending order to ``status`` with everything that goes with it, in the current unit of work;
    None if it was not pending any more (another finisher came first, and nothing changed).

    A paid order empties the cart version it paid for and writes its confirmation email and its order-paid
    event (the loyalty point's, checkout.shop.loyalty); one that ends
    unpaid gives its stock back and retires its cart version (the next try gets a new key).
    """
    ended = orders.end_pending(order, status, charge_id)
    if ended is None:
        return None
    cart_id, version = ended.cart_id, ended.cart_version  # None for an API order: no cart
    if ended.status == PAID:
        if cart_id is not None and version is not None and not carts.close_paid_version(cart_id, version):
            orders.mark_cart_moved_on(ended)
        orders.order_confirmation(ended)
        loyalty.order_paid(ended)
    else:
        orders.give_back_stock(ended.id)
        if cart_id is not None and version is not None:
            carts.retire_version(cart_id, version)
    return ended


def settle(order: OrderView, answer: GatewayAnswer, note: Callable[..., None]) -> OrderView:
    """End a pending order as the gateway answered, in the current unit of work; the order as it is now.

    Whoever comes first (the worker, reconcile, the gateway's webhook) ends the order, with its side effects
    (``end_order``), and notes it; the others change nothing. ``note`` adds an audit event (an Operation's, or
    reconcile's for an order with no record in this database).
    """
    status = _ENDS.get(answer.status)
    ended = end_order(order, status, answer.charge_id if status != FAILED else None) if status else None
    if ended is None:
        now = orders.by_public_id(order.public_id)  # already final: it is what it is
        assert now is not None
        return now
    note(_ENDED[ended.status], order_id=ended.public_id, charge_id=answer.charge_id)
    return ended


def answer_for(order: OrderView, respond: Responder) -> StoredResponse:
    """The endpoint's answer for an order that already has its outcome."""
    if order.status in WAS_PAID:
        # The payment's answer is the order as it was paid, whatever refunds came since: the same bytes whichever
        # path tells it (the holder, a retry, reconcile, a key still held while a webhook paid its order).
        return respond.paid(replace(order, status=PAID, refunded_cents=0, refunds=()))
    if order.status == DECLINED:
        return respond.declined(order)
    if order.status == FAILED:
        return respond.abandoned(order)
    raise ValueError(f"order {order.public_id} has no outcome yet ({order.status})")


RESPONDERS: dict[str, Responder] = {API_ENDPOINT: ApiResponder(), BROWSER_ENDPOINT: BrowserResponder()}
