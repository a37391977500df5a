"""The JSON API. Bearer tokens, problem+json errors, and its POSTs made idempotent by the
``Idempotency-Key`` header: orders, refunds, and the articles' own request, payments.

Every idempotent POST goes the same way: the key (``read_key``, a 400 first), the body
(``read_json``), its fields, then the engine's edge, ``once.respond``, with the endpoint's
pipeline and phases and the validated body its fingerprint covers."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import sqlalchemy as sa
from flask import Blueprint, Response, request
from flask_httpauth import HTTPTokenAuth
from pydantic import TypeAdapter

from checkout.errors import Problem, problem
from checkout.extensions import View, csrf, db, once
from checkout.idempotency import JsonAnswers, Pipeline, StoredResponse, Unfinished, read_key
from checkout.openapi import IDEMPOTENT, NOT_FOUND, described, paid_or_accepted, problems
from checkout.shop import payments, schemas
from checkout.shop.answers import ApiResponder
from checkout.shop.identity import ApiCustomer, api_customer
from checkout.shop.models import PAYMENT_PENDING, PENDING, Product, offered_to
from checkout.shop.orders import refund_by_public_id, view_of
from checkout.shop.orders_page import order_of, orders_of
from checkout.shop.payment import SAFE, OrderRequest, PaymentPipeline, PlaceOrder, answer_for, gateway
from checkout.shop.payments import API_PAYMENTS, ApiPaymentResponder, PaymentRequest, PlacePayment
from checkout.shop.refunds import API_REFUNDS, ApiRefundResponder, PlaceRefund, RefundRequest

bp = Blueprint("api", __name__, url_prefix="/api")
csrf.exempt(bp)  # bearer tokens are not cookies: no CSRF to forge


# Bearer tokens (Flask-HTTPAuth): every view that needs the customer says ``@token_required``; the one 401 is
# ``_unauthorized``, and Flask-HTTPAuth adds ``WWW-Authenticate: Bearer realm="checkout"`` to it.
bearer = HTTPTokenAuth(scheme="Bearer", realm="checkout")
token_required: Callable[[View], View] = bearer.login_required


def _token_holder(token: str) -> ApiCustomer | None:
    """The customer of the request's token: one indexed read per request, shared with the rate limit."""
    return api_customer() if token else None


def _unauthorized(_status: int) -> Response:
    return problem(401, "Unauthorized", "Send Authorization: Bearer <token>.")


bearer.verify_token(_token_holder)
bearer.error_handler(_unauthorized)


def current_customer() -> ApiCustomer:
    """The request's customer (a view under ``@token_required`` has one)."""
    customer: ApiCustomer = bearer.current_user()
    return customer


def _json(answer: schemas.Answer | list[Any], status: int = 200) -> Response:
    body = answer.to_bytes() if isinstance(answer, schemas.Answer) else _LIST.dump_json(answer)
    return Response(body, status=status, mimetype="application/json")


_LIST: TypeAdapter[list[Any]] = TypeAdapter(list[Any])


@bp.get("/products")
@described(operation_id="listProducts", tag="catalog", public=True,
           answers={200: (list[schemas.Product], "The products.")})  # fmt: skip
def products() -> Response:
    """The catalog, with today's prices and stock (with a token: as that customer is offered it)"""
    customer = api_customer()
    offered = offered_to(customer.id if customer is not None else None)
    rows = db.session.scalars(sa.select(Product).where(offered).order_by(Product.id)).all()
    return _json([schemas.Product.of(product) for product in rows])


@bp.get("/orders")
@described(operation_id="listOrders", tag="orders", query=schemas.OrdersQuery,
           answers={200: (list[schemas.Order], "The orders.")})  # fmt: skip
@token_required
def list_orders() -> Response:
    """Your orders, newest first"""
    customer = current_customer()
    key = request.args.get("idempotency_key")
    return _json([schemas.Order.of(view_of(order)) for order in orders_of(customer.id, key)])


@bp.get("/orders/<order_id>")
@described(operation_id="getOrder", tag="orders", answers={200: (schemas.Order, "The order."), 404: NOT_FOUND})
@token_required
def get_order(order_id: str) -> Response:
    """One of your orders"""
    customer = current_customer()
    order = order_of(customer.id, order_id)
    if order is None:
        raise Problem(404, "Not found", "No such order for this customer.")
    return _json(schemas.Order.of(view_of(order)))


def _keyed_json(empty_is: Any = None, *, takes_key: bool = True) -> tuple[str, Any]:
    """The request's key and JSON body, in that order of refusal (400 for the key, then 415, 400);
    ``takes_key=False`` leaves the Idempotency-Key header unread (the key is ""): no store to keep it."""
    key = read_key() if takes_key else ""
    return key, read_json() if empty_is is None else read_json(empty_is=empty_is)


@dataclass(frozen=True)
class PaymentAnswers(JsonAnswers):
    """The engine's JSON answers, with a 503 that says what was not confirmed: a payment, or a refund."""

    what: str = "Payment"

    def unfinished(self, outcome: Unfinished, key: str) -> Response:
        twice = "refunds" if self.what == "Refund" else "charges"
        advice = (
            f"Retry with the same Idempotency-Key: it resumes, never {twice} twice."
            if key
            else "This endpoint keeps no key: a retry is a new payment."
        )
        return problem(
            503,
            f"{self.what} not confirmed yet",
            f"{outcome.reason}. {advice}",
            type_="payment-unconfirmed",
            headers={"Retry-After": str(outcome.retry_after)},
            idempotency_key=key or None,
            **{**self.about, self.made: outcome.reference},
        )


ORDER_ANSWERS = PaymentAnswers("order_id")


def _order_resource(customer_id: int) -> Callable[[str], tuple[str, bytes] | None]:
    """Where an order being placed can be polled (``Prefer: respond-async``), and what it shows now."""

    def find(public_id: str) -> tuple[str, bytes] | None:
        order = order_of(customer_id, public_id)
        return (f"/api/orders/{public_id}", schemas.Order.of(view_of(order)).to_bytes()) if order else None

    return find


def _order_outcome(customer_id: int, respond: ApiResponder) -> Callable[[str], StoredResponse | None]:
    """The answer an order already has, if final: a webhook or reconcile may end it while its key is held."""

    def find(public_id: str) -> StoredResponse | None:
        order = order_of(customer_id, public_id)
        return answer_for(view_of(order), respond) if order is not None and order.status != PENDING else None

    return find


def _payment_outcome(customer_id: int, respond: ApiPaymentResponder) -> Callable[[str], StoredResponse | None]:
    def find(public_id: str) -> StoredResponse | None:
        payment = payments.of_customer(customer_id, public_id)
        if payment is None or payment.status == PAYMENT_PENDING:
            return None
        return payments.answer_for(payment, respond)

    return find


def _payment_resource(customer_id: int) -> Callable[[str], tuple[str, bytes] | None]:
    def find(public_id: str) -> tuple[str, bytes] | None:
        payment = payments.of_customer(customer_id, public_id)
        return (f"/api/payments/{public_id}", schemas.Payment.of(payment).to_bytes()) if payment else None

    return find


_NOTHING = object()


def _not_json(constant: str) -> NoReturn:
    """Python reads NaN, Infinity and -Infinity; JSON (RFC 8259) has no such values."""
    raise ValueError(f"{constant} is not JSON")


class _NameTwice(ValueError):
    pass


def _each_name_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """RFC 8259 leaves a name given twice to the parser: one reads the first value, another the last. A body that
    two readers could take for two payments is refused, not guessed at."""
    found: dict[str, Any] = {}
    for name, value in pairs:  # one pass: a body of 6,000 names costs what it costs to read
        if name in found:
            raise _NameTwice(f"{name!r} appears twice")
        found[name] = value
    return found


def read_json(empty_is: Any = _NOTHING) -> Any:
    """The body as JSON (415 if it is not JSON, 400 if it is malformed); ``empty_is``, when given, stands for
    an empty body."""
    data = request.get_data(cache=False)
    if not data and empty_is is not _NOTHING:
        return empty_is
    if not request.is_json:
        raise Problem(415, "Unsupported media type", "Send the body as application/json.")
    try:
        return json.loads(data, parse_constant=_not_json, object_pairs_hook=_each_name_once)
    except _NameTwice as error:
        detail = f"A field is given twice in one object ({error}): send each once."
        raise Problem(400, "Malformed JSON", detail, type_="malformed-json") from error
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise Problem(400, "Malformed JSON", "The body is not valid JSON.", type_="malformed-json") from error


@bp.post("/orders")
@described(
    operation_id="placeOrder",
    tag="orders",
    body=schemas.OrderRequest,
    answers={
        **paid_or_accepted(schemas.Order, "order"),
        402: problems("Declined, or abandoned and ended by reconcile. A final outcome: stored and replayed.",
                      "card-declined", "payment-abandoned", schema=schemas.OrderProblem),
        **IDEMPOTENT,
        422: problems("The key was used with another body (`idempotency-key-reused`, the stored record is "
                      "untouched); the body is invalid (`validation-error` with `errors` per field; nothing stored, "
                      "the key stays usable); or not enough stock (`out-of-stock` with `skus`; stored and "
                      "replayed).", "idempotency-key-reused", "validation-error", "out-of-stock",
                      schema=schemas.InvalidProblem),
    },
)  # fmt: skip
@token_required
def create_order() -> Response:
    """Place and pay an order, once per Idempotency-Key"""
    return place_order(SAFE)


def place_order(pipeline: PaymentPipeline) -> Response:
    """``POST /api/orders`` through ``pipeline``: the shop's own, or one of the lab's variants (the
    same reading, the same answers; only the pipeline's one swapped part differs)."""
    customer = current_customer()
    key, body = _keyed_json(takes_key=pipeline.keyed)
    # A 422 stores nothing: the client may fix the body and reuse the key.
    parsed = schemas.parse_order(body, customer.id)
    order_request = OrderRequest(
        customer_id=customer.id,
        idempotency_key=key,
        email=parsed.email,
        card_number=parsed.card_number,
        items=parsed.lines(),
    )
    respond = ApiResponder(key or None)
    return once.respond(
        pipeline,
        PlaceOrder(order_request, respond, pipeline).phases(),
        key=key,
        body=parsed.normalized(),
        customer=customer.public_id,
        answers=ORDER_ANSWERS,
        expected_call_seconds=gateway().expected_seconds(parsed.card_number),
        resource=_order_resource(customer.id),
        final=_order_outcome(customer.id, respond),
    )


# --- refunds: a second idempotent endpoint, its key scoped to it -----------------------


@bp.post("/orders/<order_id>/refunds")
@described(
    operation_id="refundOrder",
    tag="refunds",
    body=schemas.RefundRequest,
    answers={
        201: (schemas.Refund, "Refunded. Stored under the key and replayed."),
        404: NOT_FOUND,
        **IDEMPOTENT,
        422: problems("The key was used with another request; the body is invalid (nothing stored); the order was "
                      "never paid (`order-not-refundable`, nothing stored); or more than is left "
                      "(`refund-exceeds-charge` with `refundable_cents`, stored and replayed).",
                      "idempotency-key-reused", "validation-error", "order-not-refundable", "refund-exceeds-charge",
                      schema=schemas.InvalidProblem),
    },
)  # fmt: skip
@token_required
def create_refund(order_id: str) -> Response:
    """Refund part or all of a paid order, once per Idempotency-Key

    The key's scope is this endpoint (the route template) and the fingerprint covers the order id: a key used
    for a payment is unrelated here, and one key sent for refunds of two orders is 422 `idempotency-key-reused`.
    An empty body refunds all that is left; a JSON `null` is no object (422).
    """
    return refund_order(order_id, REFUNDS)


REFUNDS = PaymentPipeline(API_REFUNDS)


def refund_order(order_id: str, pipeline: PaymentPipeline) -> Response:
    """``POST /api/orders/<id>/refunds`` through ``pipeline`` (its store, scope, fingerprint and key rule)."""
    customer = current_customer()
    key, body = _keyed_json(empty_is={}, takes_key=pipeline.keyed)
    parsed = schemas.parse(schemas.RefundRequest, body, "Invalid refund")
    if order_of(customer.id, order_id) is None:
        raise Problem(404, "Not found", "No such order for this customer.")
    return once.respond(
        pipeline,
        PlaceRefund(
            RefundRequest(customer.id, order_id, pipeline.order_key_of(key), parsed.amount_cents, parsed.reason),
            ApiRefundResponder(),
            gateway(),
            pipeline,
        ).phases(),
        key=key,
        # The scope is the route template; the fingerprint covers the order, so one key for two orders is a 422.
        body={"order_id": order_id, **parsed.model_dump()},
        customer=customer.public_id,
        answers=PaymentAnswers("refund_id", {"order_id": order_id}, "Refund"),
    )


@bp.get("/orders/<order_id>/refunds/<refund_id>")
@described(operation_id="getRefund", tag="refunds",
           answers={200: (schemas.Refund, "The refund."), 404: NOT_FOUND})  # fmt: skip
@token_required
def get_refund(order_id: str, refund_id: str) -> Response:
    """One refund of one of your orders"""
    customer = current_customer()
    refund = refund_by_public_id(refund_id) if order_of(customer.id, order_id) is not None else None
    if refund is None or refund.order_public_id != order_id:
        raise Problem(404, "Not found", "No such refund for this customer.")
    return _json(schemas.Refund.of(refund))


# --- payments: the articles' own request, its own key scope ------------------------------------


@bp.post("/payments")
@described(
    operation_id="pay",
    tag="payments",
    body=schemas.PaymentRequest,
    answers={
        **paid_or_accepted(schemas.Payment, "payment"),
        402: problems("Declined, or abandoned and ended by reconcile. A final outcome: stored and replayed; the "
                      "order may be paid with a new key.", "card-declined", "payment-abandoned",
                      schema=schemas.PaymentProblem),
        **IDEMPOTENT,
        409: problems("A request with this key is still being processed (`idempotency-request-in-progress`, after "
                      "waiting as long as `Prefer: wait` asked), or another key is paying this `orderId` right now "
                      "(`order-payment-in-progress`): nothing is stored, retry after `Retry-After` seconds with "
                      "the same key. Or the `orderId` is already paid (`order-already-paid`, with the existing "
                      "payment as `id` and `payment_id`): a final answer, stored under this key and replayed.",
                      "idempotency-request-in-progress", "order-payment-in-progress", "order-already-paid",
                      schema=schemas.PaymentProblem),
        422: problems("The key was used with another body (`idempotency-key-reused`, the stored record is "
                      "untouched), or the body is invalid (`validation-error` with `errors` per field; nothing "
                      "stored, the key stays usable).", "idempotency-key-reused", "validation-error",
                      schema=schemas.InvalidProblem),
    },
)  # fmt: skip
@token_required
def create_payment() -> Response:
    """Pay for your own order reference, once per Idempotency-Key

    The key's scope is this endpoint: a key used for an order is unrelated here. The database holds at most one
    pending or succeeded payment per customer and `orderId`: a new key for an order already paid is 409
    `order-already-paid`; a declined or abandoned attempt leaves the order free for another key.
    """
    customer = current_customer()
    key, body = _keyed_json()
    parsed = schemas.parse(schemas.PaymentRequest, body, "Invalid payment")  # a 422 stores nothing
    respond = ApiPaymentResponder(key)
    return once.respond(
        PAYMENTS,
        PlacePayment(PaymentRequest(customer.id, key, parsed), respond, gateway()).phases(),
        key=key,
        body=parsed.normalized(),
        customer=customer.public_id,
        answers=PaymentAnswers("payment_id", {"order_id": parsed.order_ref}),
        expected_call_seconds=gateway().expected_seconds(parsed.card_number),
        resource=_payment_resource(customer.id),
        final=_payment_outcome(customer.id, respond),
    )


PAYMENTS = Pipeline(API_PAYMENTS)


@bp.get("/payments/<payment_id>")
@described(operation_id="getPayment", tag="payments",
           answers={200: (schemas.Payment, "The payment."), 404: NOT_FOUND})  # fmt: skip
@token_required
def get_payment(payment_id: str) -> Response:
    """One of your payments (`pending` until its outcome is known)"""
    customer = current_customer()
    payment = payments.of_customer(customer.id, payment_id)
    if payment is None:
        raise Problem(404, "Not found", "No such payment for this customer.")
    return _json(schemas.Payment.of(payment))
