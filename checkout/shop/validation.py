"""Validation and normalization of an API order body.

The normalized body is what the fingerprint covers: keys sorted (by the
fingerprint), the card number as digits only, the email as the validator
normalizes it, nothing volatile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from email_validator import EmailNotValidError, validate_email

from checkout.extensions import db
from checkout.gateway.cards import digits_only, luhn_valid
from checkout.shop.cart import MAX_QUANTITY
from checkout.shop.models import Product
from checkout.shop.placement import Line

MAX_LINES = 50


@dataclass(frozen=True)
class ValidOrder:
    lines: tuple[Line, ...]
    email: str
    card_number: str
    currency: str

    def normalized(self) -> dict[str, Any]:
        return {
            "items": [{"sku": line.sku, "quantity": line.quantity} for line in self.lines],
            "email": self.email,
            "card_number": self.card_number,
        }


def validate_order(body: Any) -> tuple[ValidOrder | None, dict[str, list[str]]]:
    """Return the valid order, or the errors per field (``items[0].sku`` style)."""
    errors: dict[str, list[str]] = {}

    def error(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if not isinstance(body, dict):
        return None, {"body": ["must be a JSON object"]}

    raw_items = body.get("items")
    requested: list[tuple[str, int]] = []
    if not isinstance(raw_items, list) or not raw_items:
        error("items", "must be a non-empty list")
    elif len(raw_items) > MAX_LINES:
        error("items", f"at most {MAX_LINES} lines")
    else:
        for index, item in enumerate(raw_items):
            if not isinstance(item, dict):
                error(f"items[{index}]", "must be an object with sku and quantity")
                continue
            sku, quantity = item.get("sku"), item.get("quantity")
            if not isinstance(sku, str) or not sku:
                error(f"items[{index}].sku", "must be a string")
            if isinstance(quantity, bool) or not isinstance(quantity, int) or not 1 <= quantity <= MAX_QUANTITY:
                error(f"items[{index}].quantity", f"must be a whole number from 1 to {MAX_QUANTITY}")
            if isinstance(sku, str) and sku and isinstance(quantity, int) and not isinstance(quantity, bool):
                requested.append((sku, quantity))

    email = body.get("email")
    normalized_email = ""
    if not isinstance(email, str):
        error("email", "must be a string")
    else:
        try:
            normalized_email = validate_email(email, check_deliverability=False).normalized
        except EmailNotValidError as exc:
            error("email", str(exc))

    card = body.get("card_number")
    card_digits = ""
    if (
        not isinstance(card, str)
        or any(not (ch.isdigit() or ch in " -") for ch in card)
        or not luhn_valid(digits_only(card))
    ):
        error("card_number", "must be a valid card number (digits, spaces allowed)")
    else:
        card_digits = digits_only(card)

    products: dict[str, Product] = {}
    if requested:
        skus = {sku for sku, _ in requested}
        products = {p.sku: p for p in db.session.scalars(sa.select(Product).where(Product.sku.in_(skus)))}
        db.session.commit()
        for index, (sku, _qty) in enumerate(requested):
            if sku not in products:
                error(f"items[{index}].sku", f"unknown sku {sku!r}")
        currencies = {p.currency for p in products.values()}
        if len(currencies) > 1:
            error("items", "all items must share one currency")

    if errors:
        return None, errors
    lines = tuple(
        Line(sku=sku, name=products[sku].name, quantity=qty, unit_price_cents=products[sku].price_cents)
        for sku, qty in requested
    )
    return ValidOrder(lines, normalized_email, card_digits, products[requested[0][0]].currency), {}
