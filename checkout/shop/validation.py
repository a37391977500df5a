"""An API order body: parsed (no database), then priced from the catalog.

Parsing is all a retry needs: the fingerprint covers the parsed, normalized
body (the lines as sent, the card number as digits only, the email as the
validator normalizes it, nothing volatile), so a replay is answered without
reading the catalog. Pricing (known SKUs, today's prices) happens when an
order is really placed, inside the claim's own transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from checkout.extensions import db
from checkout.shop import parsing
from checkout.shop.models import Line, Product
from checkout.shop.parsing import RequestedLine

Errors = dict[str, list[str]]


@dataclass(frozen=True)
class ParsedOrder:
    items: tuple[RequestedLine, ...]
    email: str
    card_number: str
    purchase: str | None = None  # the client's purchase reference, if it sends one

    def normalized(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "items": [{"sku": item.sku, "quantity": item.quantity} for item in self.items],
            "email": self.email,
            "card_number": self.card_number,
        }
        if self.purchase is not None:
            body["purchase"] = self.purchase
        return body


@dataclass(frozen=True)
class PricedLines:
    lines: tuple[Line, ...]
    currency: str


def _field(errors: Errors, name: str, parse: Any, raw: object) -> Any:
    try:
        return parse(raw)
    except parsing.Invalid as error:
        errors[name] = [str(error)]
        return None


def parse_order(body: Any) -> tuple[ParsedOrder | None, Errors]:
    """The order as sent, or the errors per field (``items[0].sku`` style); nothing is read from the database."""
    if not isinstance(body, dict):
        return None, {"body": ["must be a JSON object"]}
    requested, errors = parsing.items(body.get("items"))
    email = _field(errors, "email", parsing.email, body.get("email"))
    card = _field(errors, "card_number", parsing.card_number, body.get("card_number"))
    purchase = _field(errors, "purchase", parsing.purchase, body.get("purchase"))
    if errors:
        return None, {**errors, **price(requested)[1]}  # report unknown SKUs in the same answer
    return ParsedOrder(tuple(requested), email, card, purchase), {}


def price(items: Sequence[RequestedLine]) -> tuple[PricedLines | None, Errors]:
    """The lines at today's prices, or the errors of the items the catalog does not know."""
    if not items:
        return None, {}
    skus = {item.sku for item in items}
    products = {
        row.sku: row
        for row in db.session.execute(
            sa.select(Product.sku, Product.name, Product.price_cents, Product.currency).where(Product.sku.in_(skus))
        )
    }
    errors: Errors = {}
    for item in items:
        if item.sku not in products:
            errors[f"items[{item.index}].sku"] = [f"unknown sku {item.sku!r}"]
    if len({product.currency for product in products.values()}) > 1:
        errors["items"] = ["all items must share one currency"]
    if errors:
        return None, errors
    lines = tuple(
        Line(item.sku, products[item.sku].name, item.quantity, products[item.sku].price_cents) for item in items
    )
    return PricedLines(lines, products[items[0].sku].currency), {}


@dataclass(frozen=True)
class ValidOrder:
    order: ParsedOrder
    priced: PricedLines

    @property
    def lines(self) -> tuple[Line, ...]:
        return self.priced.lines

    @property
    def currency(self) -> str:
        return self.priced.currency

    @property
    def email(self) -> str:
        return self.order.email

    @property
    def card_number(self) -> str:
        return self.order.card_number


def validate_order(body: Any) -> tuple[ValidOrder | None, Errors]:
    """Parsed and priced at once (for paths that place an order on every call: the lab's twins)."""
    parsed, errors = parse_order(body)
    if parsed is None:
        return None, errors
    priced, errors = price(parsed.items)
    if priced is None:
        return None, errors
    return ValidOrder(parsed, priced), {}
