"""What a client sends: small parsers shared by the JSON API and the forms, then an API order body.

Each parser takes a raw value (any JSON value, or a form string) and returns the clean value, or raises
``Invalid`` with a message for that field. Text never holds a NUL or a lone surrogate (neither can be stored or
encoded), card numbers are ASCII digits. An order body is parsed with no database (the fingerprint covers the
parsed, normalised body, so a replay is answered without the catalog), and priced from the catalog only when an
order is really placed, inside the claim's own transaction.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from email_validator import EmailNotValidError, validate_email

from checkout.extensions import db
from checkout.gateway.client import digits_only, luhn_valid
from checkout.shop.models import MAX_PAYMENT_AMOUNT, MAX_QUANTITY, PAYMENT_CURRENCIES, Product
from checkout.shop.orders import Line

MAX_LINES = 50
_SKU = re.compile(r"[A-Z0-9][A-Z0-9-]{0,31}")
_PURCHASE = re.compile(r"[\x21-\x7e]{1,64}")
_CARD_CHARACTERS = frozenset("0123456789 -")


class Invalid(ValueError):
    """A value a client sent that cannot be used; the message says what would do."""


def text(raw: object, *, max_length: int) -> str:
    if not isinstance(raw, str):
        raise Invalid("must be a string")
    if "\x00" in raw or any("\ud800" <= char <= "\udfff" for char in raw):
        raise Invalid("must not contain NUL characters or unpaired surrogates")
    if len(raw) > max_length:
        raise Invalid(f"must be at most {max_length} characters")
    return raw


def card_number(raw: object) -> str:
    """The card's digits: ASCII digits, with spaces or dashes between them, passing the Luhn check."""
    value = text(raw, max_length=40)
    if not set(value) <= _CARD_CHARACTERS or not luhn_valid(digits_only(value)):
        raise Invalid("must be a valid card number: 12 to 19 digits, spaces allowed (try 4242 4242 4242 4242)")
    return digits_only(value)


def email(raw: object) -> str:
    value = text(raw, max_length=254).strip()
    try:
        return validate_email(value, check_deliverability=False).normalized
    except EmailNotValidError as error:
        raise Invalid(f"must be a valid email address ({error})") from None


def sku(raw: object) -> str:
    value = text(raw, max_length=32)
    if not _SKU.fullmatch(value):
        raise Invalid("must be a product code like MUG-01")
    return value


def purchase(raw: object) -> str | None:
    """The client's own name for a purchase (optional): 1 to 64 visible ASCII characters."""
    if raw is None:
        return None
    value = text(raw, max_length=64)
    if not _PURCHASE.fullmatch(value):
        raise Invalid("must be 1 to 64 visible ASCII characters")
    return value


def is_purchase(raw: object) -> bool:
    try:
        return purchase(raw) is not None
    except Invalid:
        return False


def quantity(raw: object) -> int:
    """A whole number 1..99: a JSON integer, or a form's digits."""
    if isinstance(raw, str) and raw.strip().isascii() and raw.strip().isdigit() and len(raw.strip()) <= 3:
        raw = int(raw.strip())
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_QUANTITY:
        raise Invalid(f"must be a whole number from 1 to {MAX_QUANTITY}")
    return raw


@dataclass(frozen=True)
class RequestedLine:
    index: int  # its place in the request, so an error found later names the right item
    sku: str
    quantity: int


def lines(raw: object) -> list[Any]:
    """The lines of an order as sent: a list of 1 to 50 (each line is parsed on its own)."""
    if not isinstance(raw, list) or not raw:
        raise Invalid("must be a non-empty list")
    if len(raw) > MAX_LINES:
        raise Invalid(f"at most {MAX_LINES} lines")
    return raw


MAX_CENTS = 100_000_000


def amount_cents(raw: object) -> int | None:
    """An optional amount in cents: a whole number above zero, or nothing (meaning: all that is left)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 < raw <= MAX_CENTS:
        raise Invalid(f"must be a whole number of cents from 1 to {MAX_CENTS}")
    return raw


def amount_in_dollars(raw: object) -> int | None:
    """A form's amount like "14.00" or "14" in cents; empty means all that is left."""
    value = text(raw if raw is not None else "", max_length=20).strip()
    if not value:
        return None
    whole, _, fraction = value.partition(".")
    if not (whole.isascii() and whole.isdigit()) or not (fraction == "" or (fraction.isascii() and fraction.isdigit())):
        raise Invalid("must be an amount like 14.00")
    if len(fraction) > 2 or len(whole) > 7:
        raise Invalid("must be an amount like 14.00")
    return amount_cents(int(whole) * 100 + int((fraction + "00")[:2]))


def reason(raw: object) -> str:
    return "" if raw is None else text(raw, max_length=200).strip()


# --- a payment's fields (POST /api/payments) ------------------------------------------------

DEFAULT_CARD = "4242424242424242"  # a payment sent without a card pays with the gateway's success test card


def order_reference(raw: object) -> str:
    if raw is None:
        raise Invalid("is required: your own reference for the order, 1 to 64 visible ASCII characters")
    found = purchase(raw)
    assert found is not None
    return found


def minor_units(raw: object) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_PAYMENT_AMOUNT:
        raise Invalid(f"must be a whole number of minor units from 1 to {MAX_PAYMENT_AMOUNT:,}")
    return raw


def payment_currency(raw: object) -> str:
    if not isinstance(raw, str) or raw not in PAYMENT_CURRENCIES:
        raise Invalid("must be one of " + ", ".join(PAYMENT_CURRENCIES))
    return raw


def card_or_default(raw: object) -> str:
    return DEFAULT_CARD if raw is None else card_number(raw)


# --- an order's lines, priced from the catalog ------------------------------------------------

Errors = dict[str, list[str]]


@dataclass(frozen=True)
class PricedLines:
    lines: tuple[Line, ...]
    currency: str


_PRICES = sa.select(Product.sku, Product.name, Product.price_cents, Product.currency).where(
    Product.sku.in_(sa.bindparam("_skus", expanding=True))
)


def price(items: Sequence[RequestedLine]) -> tuple[PricedLines | None, Errors]:
    """The lines at today's prices, or the errors of the items the catalog does not know."""
    if not items:
        return None, {}
    skus = {item.sku for item in items}
    products = {row.sku: row for row in db.session.execute(_PRICES, {"_skus": sorted(skus)})}
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
