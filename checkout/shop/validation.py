"""An API order body, validated and normalized.

The normalized body is what the fingerprint covers: the lines as sent (sku
and quantity), the card number as digits only, the email as the validator
normalizes it, nothing volatile. Prices come from the catalog, today.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from checkout.extensions import db
from checkout.shop import parsing
from checkout.shop.lines import Line
from checkout.shop.models import Product


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


def _field(errors: dict[str, list[str]], name: str, parse: Any, raw: object) -> Any:
    try:
        return parse(raw)
    except parsing.Invalid as error:
        errors[name] = [str(error)]
        return None


def validate_order(body: Any) -> tuple[ValidOrder | None, dict[str, list[str]]]:
    """Return the valid order, or the errors per field (``items[0].sku`` style)."""
    if not isinstance(body, dict):
        return None, {"body": ["must be a JSON object"]}
    requested, errors = parsing.items(body.get("items"))
    email = _field(errors, "email", parsing.email, body.get("email"))
    card = _field(errors, "card_number", parsing.card_number, body.get("card_number"))

    products = {}
    if requested:
        skus = {line.sku for line in requested}
        products = {p.sku: p for p in db.session.scalars(sa.select(Product).where(Product.sku.in_(skus)))}
        for line in requested:
            if line.sku not in products:
                errors[f"items[{line.index}].sku"] = [f"unknown sku {line.sku!r}"]
        if len({p.currency for p in products.values()}) > 1:
            errors["items"] = ["all items must share one currency"]
    if errors:
        return None, errors
    lines = tuple(
        Line(
            sku=line.sku,
            name=products[line.sku].name,
            quantity=line.quantity,
            unit_price_cents=products[line.sku].price_cents,
        )
        for line in requested
    )
    return ValidOrder(lines, email, card, products[requested[0].sku].currency), {}
