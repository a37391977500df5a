"""What the lab's variants of ``POST /api/orders`` share: the same request, read the same way, and
orders that say which checkout placed them.

A variant keeps the API's contract (``Authorization: Bearer``, ``Idempotency-Key``,
the JSON body; 401, 400, 415 and 422 before anything is written) and changes
one thing behind it: where its idempotency records live (the Redis store), or
which gateway interface it pays through (the legacy gateway).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from flask import Response, request

from checkout.extensions import db
from checkout.idempotency import InvalidKey, Operation, Step, fingerprint, parse_key
from checkout.problems import problem
from checkout.shop.identity import ApiCustomer, api_customer
from checkout.shop.models import Order
from checkout.shop.placement import OrderRequest, PlaceOrder
from checkout.shop.runtime import fingerprint_secret
from checkout.shop.validation import ParsedOrder, parse_order


@dataclass(frozen=True)
class AskedOrder:
    """A valid order request: who asks, under which key, for what."""

    customer: ApiCustomer
    key: str
    parsed: ParsedOrder

    def order_request(self) -> OrderRequest:
        return OrderRequest(
            customer_id=self.customer.id,
            idempotency_key=self.key,
            email=self.parsed.email,
            card_number=self.parsed.card_number,
            items=self.parsed.items,
            purchase_ref=self.parsed.purchase,
        )

    def fingerprint(self, endpoint: str) -> str:
        """The request's fingerprint on this endpoint (keyed, like the API's: it covers the card number)."""
        return fingerprint(fingerprint_secret(), "POST", endpoint, self.parsed.normalized())


def read_order(*, takes_key: bool = True) -> AskedOrder | Response:
    """The request as ``POST /api/orders`` reads it, or the problem+json answer it gets. Nothing is written.

    ``takes_key=False`` leaves the Idempotency-Key header unread (the key is ""): a twin that ignores it.
    """
    customer = api_customer()
    if customer is None:
        return problem(
            401,
            "Unauthorized",
            "Send Authorization: Bearer <token>.",
            headers={"WWW-Authenticate": 'Bearer realm="checkout"'},
        )
    key = ""
    if takes_key:
        try:
            key = parse_key(request.headers.get("Idempotency-Key"))
        except InvalidKey as error:
            return problem(400, "Invalid Idempotency-Key", str(error), type_="invalid-idempotency-key")
    data = request.get_data(cache=False)
    if not request.is_json:
        return problem(415, "Unsupported media type", "Send the body as application/json.")
    try:
        body: Any = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return problem(400, "Malformed JSON", "The body is not valid JSON.", type_="malformed-json")
    parsed, errors = parse_order(body)
    if parsed is None:
        return problem(422, "Invalid order", "Some fields are invalid.", errors=errors)
    return AskedOrder(customer, key, parsed)


class PlaceLabOrder(PlaceOrder):
    """The payment's own phases; the order it creates carries the variant's ``path`` (for the damage table)."""

    path: str = "safe"

    def create_order(self, operation: Operation, nothing: None) -> Step:
        step = super().create_order(operation, nothing)
        if self.order is not None:  # this call created it, in this same transaction
            db.session.execute(sa.update(Order).where(Order.id == self.order.id).values(path=self.path))
        return step


def path_of(order_id: int) -> str | None:
    return db.session.scalar(sa.select(Order.path).where(Order.id == order_id))
