"""The session cart, its version, and the checkout key remembered for it.

Every change to the cart bumps its version. The checkout form carries the
version it was rendered for, so a stale form is recognised; the key handed
out for a version is remembered, so a reload renders the same key.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import sqlalchemy as sa
from flask import session

from checkout.extensions import db
from checkout.shop.models import Product
from checkout.shop.placement import Line

MAX_QUANTITY = 99


@dataclass(frozen=True)
class CartLine:
    product: Product
    quantity: int

    @property
    def total_cents(self) -> int:
        return self.product.price_cents * self.quantity


def items() -> dict[str, int]:
    return dict(session.get("cart", {}))


def version() -> int:
    return int(session.get("cart_version", 0))


def count() -> int:
    return sum(items().values())


def _save(cart: dict[str, int]) -> None:
    session["cart"] = cart
    session["cart_version"] = version() + 1


def add(sku: str, quantity: int) -> None:
    cart = items()
    cart[sku] = min(MAX_QUANTITY, cart.get(sku, 0) + quantity)
    _save(cart)


def remove(sku: str) -> None:
    cart = items()
    cart.pop(sku, None)
    _save(cart)


def clear() -> None:
    """The order is placed: empty the cart and forget its key."""
    _save({})
    session.pop("checkout_key", None)


def lines() -> list[CartLine]:
    cart = items()
    if not cart:
        return []
    products = db.session.scalars(sa.select(Product).where(Product.sku.in_(cart.keys()))).all()
    db.session.commit()
    by_sku = {product.sku: product for product in products}
    return [CartLine(by_sku[sku], qty) for sku, qty in cart.items() if sku in by_sku]


def order_lines(cart_lines: list[CartLine]) -> tuple[Line, ...]:
    return tuple(
        Line(
            sku=line.product.sku,
            name=line.product.name,
            quantity=line.quantity,
            unit_price_cents=line.product.price_cents,
        )
        for line in cart_lines
    )


# --- the key remembered for this cart -------------------------------------


def remembered_key() -> tuple[str, int] | None:
    remembered = session.get("checkout_key")
    if not remembered:
        return None
    return str(remembered["key"]), int(remembered["version"])


def remember_new_key() -> str:
    key = str(uuid.uuid4())
    session["checkout_key"] = {"key": key, "version": version()}
    return key


def forget_key() -> None:
    session.pop("checkout_key", None)
