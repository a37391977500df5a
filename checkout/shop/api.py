"""The JSON API. Bearer tokens, problem+json errors, and its POSTs made idempotent by the
``Idempotency-Key`` header: orders, refunds, and the articles' own request, payments.

Every idempotent POST goes the same way: the key (``_idempotency_key``), the body
(``_read_json``), its fields, then ``_run``: the engine with the endpoint's phases
and the fingerprint of the validated body, its outcome answered by ``answer``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NoReturn, assert_never

import sqlalchemy as sa
from flask import Blueprint, Response, current_app, request
from flask_httpauth import HTTPTokenAuth
from pydantic import TypeAdapter
from sqlalchemy.exc import OperationalError

from checkout.database import writing
from checkout.errors import Problem, problem
from checkout.extensions import View, csrf, db
from checkout.idempotency import Phase, Scope, StoredResponse, parse_key, run
from checkout.idempotency.audit import note
from checkout.idempotency.keys import InvalidKey
from checkout.idempotency.sql_store import SQL_STORE
from checkout.idempotency.store import RecordStore
from checkout.idempotency.types import Done, InProgress, Mismatch, Outcome, Refused, Unfinished
from checkout.openapi import IDEMPOTENT, NOT_FOUND, described, paid_or_accepted, problems
from checkout.shop import payments, schemas
from checkout.shop.identity import ApiCustomer, api_customer
from checkout.shop.models import Product
from checkout.shop.orders import refund_by_public_id, view_of
from checkout.shop.orders_page import order_of, orders_of
from checkout.shop.payments import API_PAYMENTS, ApiPaymentResponder, PaymentRequest, PlacePayment
from checkout.shop.placement import (
    SAFE,
    ApiResponder,
    OrderRequest,
    PaymentEvent,
    Pipeline,
    PlaceOrder,
    gateway,
    idempotency_settings,
    key_reused,
    keyed_fingerprint,
)
from checkout.shop.refunds import API_REFUNDS, ApiRefundResponder, PlaceRefund, RefundRequest

bp = Blueprint("api", __name__, url_prefix="/api")
csrf.exempt(bp)  # bearer tokens are not cookies: no CSRF to forge

MAX_PREFER_WAIT_SECONDS = 10
_PREFER_WAIT = re.compile(r"(?:^|[,;\s])wait\s*=\s*(\d{1,6})(?:$|[,;\s])", re.IGNORECASE)


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


def _customer() -> ApiCustomer:
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
    """The catalog, with today's prices and stock"""
    rows = db.session.scalars(sa.select(Product).order_by(Product.id)).all()
    return _json([schemas.Product.of(product) for product in rows])


@bp.get("/orders")
@described(operation_id="listOrders", tag="orders", query=schemas.OrdersQuery,
           answers={200: (list[schemas.Order], "The orders.")})  # fmt: skip
@token_required
def list_orders() -> Response:
    """Your orders, newest first"""
    customer = _customer()
    key = request.args.get("idempotency_key")
    return _json([schemas.Order.of(view_of(order)) for order in orders_of(customer.id, key)])


@bp.get("/orders/<order_id>")
@described(operation_id="getOrder", tag="orders", answers={200: (schemas.Order, "The order."), 404: NOT_FOUND})
@token_required
def get_order(order_id: str) -> Response:
    """One of your orders"""
    customer = _customer()
    order = order_of(customer.id, order_id)
    if order is None:
        raise Problem(404, "Not found", "No such order for this customer.")
    return _json(schemas.Order.of(view_of(order)))


def _keyed_json(empty_is: Any = None, *, takes_key: bool = True) -> tuple[str, Any]:
    """The request's key and JSON body, in that order of refusal (400 for the key, then 415, 400);
    ``takes_key=False`` leaves the Idempotency-Key header unread (the key is ""): no store to keep it."""
    key = _idempotency_key() if takes_key else ""
    return key, _read_json() if empty_is is None else _read_json(empty_is=empty_is)


def _idempotency_key() -> str:
    """The request's key; a 400 refuses one missing, malformed, or sent more than once."""
    try:
        return parse_key(request.headers.get("Idempotency-Key"))
    except InvalidKey as error:
        raise Problem(400, "Invalid Idempotency-Key", str(error), type_="invalid-idempotency-key") from error


# What an operation in progress made, for ``Prefer: respond-async``: its URL and its answer now.
Resource = Callable[[str], tuple[str, schemas.Answer] | None]


def _run(
    scope: Scope,
    request_fingerprint: str,
    phases: dict[str, Phase],
    reference_name: str = "order_id",
    resource: Resource | None = None,
    card_number: str | None = None,
    store: RecordStore | None = SQL_STORE,
    order_id: str | None = None,
) -> Response:
    """Run an endpoint's phases once per key, waiting as ``Prefer: wait`` asks, and answer the outcome.

    With ``Prefer: respond-async`` (RFC 7240) and a ``resource``, an operation still in progress or
    with an unknown outcome (or refused as in progress by a first phase) is answered 202 Accepted
    with the ``Location`` of what is being made, which shows ``pending`` until the outcome, instead of a 409 or a 503.
    """
    wait = preferred_wait()
    settings = idempotency_settings()
    if card_number is not None:  # a duplicate's Retry-After: when a charge with this card should be answered
        settings = replace(settings, expected_call_seconds=gateway().expected_seconds(card_number))
    outcome = run(scope, request_fingerprint, phases, settings=settings, wait_seconds=wait, store=store)
    applied = [f"wait={wait}"] if wait else []
    response = None
    if resource is not None and prefers_async() and (pending := _still_at_work(outcome)) is not None:
        response = _accepted(resource, *pending)
        if response is not None:
            applied.insert(0, "respond-async")
            _note_accepted(scope)
    if response is None:
        response = answer(outcome, scope.key, reference_name, order_id)
    if applied:
        response.headers["Preference-Applied"] = ", ".join(applied)
    return response


def _still_at_work(outcome: Outcome) -> tuple[str, int] | None:
    """What is still being made, and when to look again: this key's operation (409 in progress, 503 unknown),
    or what a first phase refused this request for as in progress (its own order or payment, pending with its
    record gone; another key's payment of the same order, 409 order-payment-in-progress)."""
    if isinstance(outcome, InProgress | Unfinished) and outcome.reference:
        return outcome.reference, outcome.retry_after
    if isinstance(outcome, Refused) and outcome.reference and outcome.response.status == 409:
        return outcome.reference, int(outcome.response.headers.get("Retry-After", 1))
    return None


def _note_accepted(scope: Scope) -> None:
    """The trail says what this request was told, 202, after the conflict or release it noted, or alone when a
    first phase refused it as in progress (the lab lists the latter). An audit line never changes the answer: if the
    database is busy, the 202 goes without it."""
    try:
        with writing(durable=False):
            note(scope, PaymentEvent.ACCEPTED)
    except OperationalError as error:
        current_app.logger.warning("the 202 of %s went unnoted: %s", scope.endpoint, str(error).splitlines()[0])


def _accepted(resource: Resource, reference: str, retry_after: int) -> Response | None:
    found = resource(reference)
    if found is None:
        return None
    location, body = found
    response = _json(body, 202)
    response.headers["Location"] = location
    response.headers["Retry-After"] = str(retry_after)
    return response


def prefers_async() -> bool:
    """``Prefer: respond-async``: the client would rather poll than wait or be told 409 or 503."""
    preferences = request.headers.get("Prefer", "").replace(";", ",").split(",")
    return any(token.strip().lower() == "respond-async" for token in preferences)


def _order_resource(customer_id: int) -> Resource:
    def find(public_id: str) -> tuple[str, schemas.Answer] | None:
        order = order_of(customer_id, public_id)
        return (f"/api/orders/{public_id}", schemas.Order.of(view_of(order))) if order is not None else None

    return find


def _payment_resource(customer_id: int) -> Resource:
    def find(public_id: str) -> tuple[str, schemas.Answer] | None:
        payment = payments.of_customer(customer_id, public_id)
        return (f"/api/payments/{public_id}", schemas.Payment.of(payment)) if payment is not None else None

    return find


def preferred_wait() -> int:
    """``Prefer: wait=N`` (RFC 7240): how long the client will wait for an operation in progress, capped."""
    found = _PREFER_WAIT.search(request.headers.get("Prefer", ""))
    return min(int(found.group(1)), MAX_PREFER_WAIT_SECONDS) if found else 0


_NOTHING = object()


def _not_json(constant: str) -> NoReturn:
    """Python reads NaN, Infinity and -Infinity; JSON (RFC 8259) has no such values."""
    raise ValueError(f"{constant} is not JSON")


def _read_json(empty_is: Any = _NOTHING) -> Any:
    """The body as JSON (415 if it is not JSON, 400 if it is malformed); ``empty_is``, when given, stands for
    an empty body."""
    data = request.get_data(cache=False)
    if not data and empty_is is not _NOTHING:
        return empty_is
    if not request.is_json:
        raise Problem(415, "Unsupported media type", "Send the body as application/json.")
    try:
        return json.loads(data, parse_constant=_not_json)
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


def place_order(pipeline: Pipeline) -> Response:
    """``POST /api/orders`` through ``pipeline``: the shop's own, or one of the lab's variants (the
    same reading, the same answers; only the pipeline's one swapped part differs)."""
    customer = _customer()
    key, body = _keyed_json(takes_key=pipeline.store is not None)
    parsed = schemas.parse_order(body)  # a 422 stores nothing: the client may fix the body and reuse the key
    order_request = OrderRequest(
        customer_id=customer.id,
        idempotency_key=key,
        email=parsed.email,
        card_number=parsed.card_number,
        items=parsed.lines(),
        purchase_ref=parsed.purchase,
    )
    return _run(
        pipeline.scope_of(customer.public_id, pipeline.endpoint, key),
        pipeline.fingerprint_of(pipeline.endpoint, parsed.normalized()),
        PlaceOrder(order_request, ApiResponder(key or None), pipeline).phases(),
        resource=_order_resource(customer.id),
        card_number=parsed.card_number,
        store=pipeline.store,
    )


def _stored(response: StoredResponse) -> Response:
    answered = Response(response.body, status=response.status)
    for name, value in response.headers.items():
        answered.headers[name] = value
    return answered


def answer(outcome: Outcome, key: str, reference_name: str = "order_id", order_id: str | None = None) -> Response:
    """The HTTP answer for the engine's outcome (shared by every idempotent endpoint).

    ``reference_name`` names what the operation created, in the body of a 409 or 503:
    ``order_id``, ``refund_id`` or ``payment_id``; ``order_id``, the order a refund or a payment is
    for, is known from the request before anything is created.
    """

    def about(reference: str | None) -> dict[str, str | None]:
        return {"order_id": order_id, reference_name: reference}  # the order it is for; what it made so far

    match outcome:
        case Done(response=stored, replayed=replayed):
            response = _stored(stored)
            if replayed:
                response.headers["Idempotent-Replayed"] = "true"
            return response
        case Refused(response=stored):
            return _stored(stored)
        case Mismatch():
            return _stored(key_reused())
        case InProgress(reference=reference, retry_after=retry_after):
            return problem(
                409,
                "Request in progress",
                "A request with this Idempotency-Key is still being processed; retry later.",
                type_="idempotency-request-in-progress",
                headers={"Retry-After": str(retry_after)},
                idempotency_key=key,
                **about(reference),
            )
        case Unfinished(reason=reason, reference=reference, retry_after=retry_after):
            refund = reference_name == "refund_id"
            advice = (
                f"Retry with the same Idempotency-Key: it resumes, never {'refunds' if refund else 'charges'} twice."
                if key
                else "This endpoint keeps no key (the lab's unsafe twin): a retry is a new payment."
            )
            return problem(
                503,
                "Refund not confirmed yet" if refund else "Payment not confirmed yet",
                f"{reason}. {advice}",
                type_="payment-unconfirmed",
                headers={"Retry-After": str(retry_after)},
                idempotency_key=key or None,
                **about(reference),
            )
    assert_never(outcome)


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


REFUNDS = Pipeline(API_REFUNDS)


def refund_order(order_id: str, pipeline: Pipeline) -> Response:
    """``POST /api/orders/<id>/refunds`` through ``pipeline`` (its store, scope, fingerprint and key rule)."""
    customer = _customer()
    key, body = _keyed_json(empty_is={}, takes_key=pipeline.store is not None)
    parsed = schemas.parse(schemas.RefundRequest, body, "Invalid refund")
    if order_of(customer.id, order_id) is None:
        raise Problem(404, "Not found", "No such order for this customer.")
    return _run(
        pipeline.scope_of(customer.public_id, pipeline.endpoint, key),
        # The scope is the route template; the fingerprint covers the order, so one key for two orders is a 422.
        pipeline.fingerprint_of(pipeline.endpoint, {"order_id": order_id, **parsed.model_dump()}),
        PlaceRefund(
            RefundRequest(customer.id, order_id, pipeline.order_key_of(key), parsed.amount_cents, parsed.reason),
            ApiRefundResponder(),
            gateway(),
            pipeline.path,
        ).phases(),
        reference_name="refund_id",
        store=pipeline.store,
        order_id=order_id,
    )


@bp.get("/orders/<order_id>/refunds/<refund_id>")
@described(operation_id="getRefund", tag="refunds",
           answers={200: (schemas.Refund, "The refund."), 404: NOT_FOUND})  # fmt: skip
@token_required
def get_refund(order_id: str, refund_id: str) -> Response:
    """One refund of one of your orders"""
    customer = _customer()
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
    customer = _customer()
    key, body = _keyed_json()
    parsed = schemas.parse(schemas.PaymentRequest, body, "Invalid payment")  # a 422 stores nothing
    return _run(
        Scope(customer.public_id, API_PAYMENTS, key),
        keyed_fingerprint(API_PAYMENTS, parsed.normalized()),
        PlacePayment(PaymentRequest(customer.id, key, parsed), ApiPaymentResponder(key), gateway()).phases(),
        reference_name="payment_id",
        resource=_payment_resource(customer.id),
        order_id=parsed.order_ref,
        card_number=parsed.card_number,
    )


@bp.get("/payments/<payment_id>")
@described(operation_id="getPayment", tag="payments",
           answers={200: (schemas.Payment, "The payment."), 404: NOT_FOUND})  # fmt: skip
@token_required
def get_payment(payment_id: str) -> Response:
    """One of your payments (`pending` until its outcome is known)"""
    customer = _customer()
    payment = payments.of_customer(customer.id, payment_id)
    if payment is None:
        raise Problem(404, "Not found", "No such payment for this customer.")
    return _json(schemas.Payment.of(payment))
