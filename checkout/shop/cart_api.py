"""The API's cart: HTTP methods that are idempotent by their meaning, beside the one that is not.

``PUT /api/cart/lines/<sku>`` sets a line and ``DELETE`` removes it: the same request twice leaves the same cart, so
neither needs a key. ``POST /api/cart/lines`` adds to a line, an increment: sent twice, it adds twice, unless it
carries an ``Idempotency-Key`` (then the engine makes it once, as for a payment). The cart is the customer's own
(one per bearer token), apart from any browser's. Design: docs/design.md#checkoutshopcart_apipy-set-remove-add
"""

from __future__ import annotations

from typing import Annotated, Any

import sqlalchemy as sa
from flask import Blueprint, Response, request
from pydantic import Field

from checkout.database import writing
from checkout.errors import Problem
from checkout.extensions import csrf, db, once
from checkout.idempotency import STARTED, Complete, Operation, Phase, Pipeline, StoredResponse, read_key
from checkout.openapi import BAD_KEY, IN_PROGRESS, NOT_JSON, TOO_LARGE, described, problems
from checkout.shop import carts
from checkout.shop.api import current_customer, read_json, token_required
from checkout.shop.models import Product, offered_to
from checkout.shop.schemas import Answer, Quantity, Request, Sku, parse

bp = Blueprint("cart_api", __name__, url_prefix="/api")
csrf.exempt(bp)  # bearer tokens are not cookies: no CSRF to forge

ADD = Pipeline("POST /api/cart/lines")  # only with a key: without one, POST is what it is, an increment


class LineQuantity(Request):
    quantity: Quantity


class NewLine(Request):
    sku: Sku
    quantity: Quantity


class CartLine(Answer):
    sku: str
    quantity: int


class Cart(Answer):
    lines: list[CartLine]
    total_cents: Annotated[int, Field(ge=0)]

    @classmethod
    def now(cls, customer_id: int) -> Cart:
        items = carts.api_items(customer_id)
        lines = [CartLine(sku=item.sku, quantity=item.quantity) for item in items]
        return cls(lines=lines, total_cents=sum(item.total_cents for item in items))


def _json(cart: Cart) -> Response:
    return Response(cart.to_bytes(), mimetype="application/json")


def _known(sku: str) -> bool:
    """In the request's read (the token's, when no rate limit read it apart), which the writing unit then ends."""
    offered = offered_to(current_customer().id)
    return db.session.scalar(sa.select(Product.id).where(Product.sku == sku, offered)) is not None


INVALID = problems("The body is invalid: `validation-error` with `errors` per field.", "validation-error")
NO_PRODUCT = problems("The catalog has no such product.", "not-found")


@bp.get("/cart")
@described(operation_id="getCart", tag="cart", answers={200: (Cart, "Your cart as it is now.")})
@token_required
def get_cart() -> Response:
    """Your cart: the lines and their total at today's prices"""
    return _json(Cart.now(current_customer().id))


@bp.put("/cart/lines/<sku>")
@described(operation_id="setCartLine", tag="cart", body=LineQuantity,
           answers={200: (Cart, "The cart, with the line at this quantity."), 404: NO_PRODUCT, 413: TOO_LARGE,
                    415: NOT_JSON, 422: INVALID})  # fmt: skip
@token_required
def set_line(sku: str) -> Response:
    """Set a line's quantity: idempotent by its method, no key needed (the same PUT twice, the same cart)"""
    quantity = parse(LineQuantity, read_json(), "Invalid cart line").quantity
    if not _known(sku):
        raise Problem(404, "Not found", f"The catalog has no product {sku!r}.")
    who = current_customer().id
    with writing():
        carts.set_line(carts.api_cart_id(who), sku, quantity)
    return _json(Cart.now(who))


@bp.delete("/cart/lines/<sku>")
@described(operation_id="removeCartLine", tag="cart", answers={204: (None, "The cart has no such line now.")})
@token_required
def remove_line(sku: str) -> Response:
    """Remove a line: idempotent by its method. A second DELETE is 204 again: what it asks for (no such line) holds"""
    who = current_customer().id
    with writing():
        carts.remove_line(carts.api_cart_id(who), sku)
    return Response(status=204)


@bp.post("/cart/lines")
@described(operation_id="addCartLine", tag="cart", body=NewLine,
           answers={200: (Cart, "The cart, with the quantity added to the line (with a key: stored and replayed)."),
                    400: BAD_KEY, 409: IN_PROGRESS, 413: TOO_LARGE, 415: NOT_JSON,
                    422: problems("The body is invalid (`validation-error` with `errors` per field), or the key was "
                                  "used with another body (`idempotency-key-reused`).", "validation-error",
                                  "idempotency-key-reused")})  # fmt: skip
@token_required
def add_line() -> Response:
    """Add to a line: an increment, so not idempotent (twice adds twice), unless an Idempotency-Key makes it once"""
    keyed = "Idempotency-Key" in request.headers
    key = read_key() if keyed else ""
    line = parse(NewLine, read_json(), "Invalid cart line")
    if not _known(line.sku):
        raise Problem(
            422, "Invalid cart line", "Some fields are invalid.", errors={"sku": [f"unknown sku {line.sku!r}"]}
        )
    who = current_customer()
    if not keyed:
        with writing():
            carts.add_line(carts.api_cart_id(who.id), line.sku, line.quantity)
        return _json(Cart.now(who.id))

    def added(_operation: Operation, _nothing: Any) -> Complete:  # in the claim's unit of work: once per key
        carts.add_line(carts.api_cart_id(who.id), line.sku, line.quantity)
        return Complete(StoredResponse(200, {"Content-Type": "application/json"}, Cart.now(who.id).to_bytes()))

    return once.respond(ADD, {STARTED: Phase(added)}, body=line.model_dump(), key=key, customer=who.public_id)
