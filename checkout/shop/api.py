"""The JSON API. Bearer tokens, problem+json errors, and POST /api/orders
made idempotent by the ``Idempotency-Key`` header."""

from __future__ import annotations

import json

import sqlalchemy as sa
from flask import Blueprint, Response, request

from checkout.extensions import csrf, db
from checkout.idempotency import (
    Done,
    InProgress,
    MalformedKey,
    Mismatch,
    MissingKey,
    Scope,
    Unfinished,
    execute,
    fingerprint,
    parse_key,
)
from checkout.problems import json_bytes, problem
from checkout.shop.identity import api_customer
from checkout.shop.models import Customer, Product
from checkout.shop.orders_page import order_of, orders_of
from checkout.shop.placement import OrderRequest, place_order
from checkout.shop.responders import API_ENDPOINT, ApiResponder
from checkout.shop.runtime import fingerprint_secret, gateway, idempotency_settings
from checkout.shop.validation import validate_order

bp = Blueprint("api", __name__, url_prefix="/api")
csrf.exempt(bp)  # bearer tokens are not cookies: no CSRF to forge


class Unauthorized(Exception):
    pass


def _customer() -> Customer:
    customer = api_customer()
    if customer is None:
        raise Unauthorized()
    return customer


@bp.errorhandler(Unauthorized)
def _unauthorized(_error: Unauthorized) -> Response:
    return problem(
        401,
        "Unauthorized",
        "Send Authorization: Bearer <token>.",
        headers={"WWW-Authenticate": 'Bearer realm="checkout"'},
    )


def _json(payload: object, status: int = 200) -> Response:
    return Response(json_bytes(payload), status=status, mimetype="application/json")


@bp.get("/products")
def products() -> Response:
    rows = db.session.scalars(sa.select(Product).order_by(Product.id)).all()
    db.session.commit()
    return _json([{"sku": p.sku, "name": p.name, "price_cents": p.price_cents, "currency": p.currency} for p in rows])


@bp.get("/orders")
def list_orders() -> Response:
    customer = _customer()
    return _json([order.to_json() for order in orders_of(customer.id)])


@bp.get("/orders/<order_id>")
def get_order(order_id: str) -> Response:
    customer = _customer()
    order = order_of(customer.id, order_id)
    if order is None:
        return problem(404, "Not found", "No such order for this customer.")
    return _json(order.to_json())


@bp.post("/orders")
def create_order() -> Response:
    customer = _customer()
    try:
        key = parse_key(request.headers.get("Idempotency-Key"))
    except (MissingKey, MalformedKey) as exc:
        return problem(400, "Invalid Idempotency-Key", str(exc), type_="invalid-idempotency-key")
    if not request.is_json:
        return problem(415, "Unsupported media type", "Send the order as application/json.")
    try:
        body = json.loads(request.get_data(cache=False))  # 413 past MAX_CONTENT_LENGTH
    except (ValueError, UnicodeDecodeError):
        return problem(400, "Malformed JSON", "The body is not valid JSON.", type_="malformed-json")
    valid, errors = validate_order(body)
    if valid is None:
        # Nothing is stored: the client may fix the body and reuse the key.
        return problem(422, "Invalid order", "Some fields are invalid.", errors=errors)

    scope = Scope(customer.public_id, API_ENDPOINT, key)
    request_fingerprint = fingerprint(fingerprint_secret(), "POST", API_ENDPOINT, valid.normalized())
    order_request = OrderRequest(
        customer_id=customer.id,
        idempotency_key=key,
        lines=valid.lines,
        email=valid.email,
        card_number=valid.card_number,
        currency=valid.currency,
    )
    outcome = execute(
        scope,
        request_fingerprint,
        lambda operation: place_order(operation, order_request, ApiResponder(), gateway()),
        settings=idempotency_settings(),
    )
    if isinstance(outcome, Done):
        response = Response(outcome.response.body, status=outcome.response.status)
        for name, value in outcome.response.headers.items():
            response.headers[name] = value
        if outcome.replayed:
            response.headers["Idempotent-Replayed"] = "true"
        return response
    if isinstance(outcome, InProgress):
        return problem(
            409,
            "Request in progress",
            "A request with this Idempotency-Key is still being processed; retry later.",
            type_="idempotency-request-in-progress",
            headers={"Retry-After": str(outcome.retry_after)},
        )
    if isinstance(outcome, Mismatch):
        return problem(
            422,
            "Idempotency-Key reused",
            "This Idempotency-Key was used with a different request; use a new key.",
            type_="idempotency-key-reused",
        )
    assert isinstance(outcome, Unfinished)
    return problem(
        503,
        "Payment not confirmed yet",
        f"{outcome.reason}. Retry with the same Idempotency-Key: it resumes, never charges twice.",
        type_="payment-unconfirmed",
        headers={"Retry-After": str(outcome.retry_after)},
    )
