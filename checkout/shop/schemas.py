"""The JSON API's bodies and answers, each one pydantic model: it validates the request, serialises the answer,
and is the schema ``GET /api/openapi.json`` publishes (spectree reads them from the views, checkout/openapi.py).

Each rule is written once. A rule a constraint can say is a strict pydantic constraint (a JSON value is never
coerced), which the document publishes; ``MESSAGES`` gives the field's refusal in the shop's words. A rule it cannot
say (an email, a card's Luhn digits, text without a NUL or a lone surrogate) is a parser the forms share, which
returns the clean value or raises ``Invalid``.
Design: docs/design.md#the-contract-written-once-checkoutshopschemaspy-and-checkoutopenapipy
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Self, TypeVar, get_args

from email_validator import EmailNotValidError, validate_email
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema

from checkout.errors import Problem as Refusal
from checkout.gateway.cards import digits_only, luhn_valid
from checkout.shop.models import (
    MAX_PAYMENT_AMOUNT,
    MAX_QUANTITY,
    ORDER_STATES,
    PAYMENT_STATES,
    REFUND_PENDING,
    REFUND_SUCCEEDED,
    Currency,
)
from checkout.shop.orders import price

Errors = dict[str, list[str]]


# --- the parsers the forms share: text a person typed, cleaned into a value --------------------

MAX_LINES = 50
MAX_CENTS = 100_000_000
SKU = "[A-Z0-9][A-Z0-9-]{0,31}"
_DOLLARS = re.compile(r"[0-9]{1,7}(?:\.[0-9]{0,2})?")
_CARD_CHARACTERS = frozenset("0123456789 -")


class Invalid(ValueError):
    """A value a client sent that cannot be used; the message says what would do."""


def clean_text(raw: object, *, max_length: int) -> str:
    if not isinstance(raw, str):
        raise Invalid("must be a string")
    if "\x00" in raw or any("\ud800" <= char <= "\udfff" for char in raw):
        raise Invalid("must not contain NUL characters or unpaired surrogates")
    if len(raw) > max_length:
        raise Invalid(f"must be at most {max_length} characters")
    return raw


def clean_card_number(raw: object) -> str:
    """The card's digits: ASCII digits, with spaces or dashes between them, passing the Luhn check."""
    value = clean_text(raw, max_length=40)
    if not set(value) <= _CARD_CHARACTERS or not luhn_valid(digits_only(value)):
        raise Invalid("must be a valid card number: 12 to 19 digits, spaces allowed (try 4242 4242 4242 4242)")
    return digits_only(value)


def clean_email(raw: object) -> str:
    value = clean_text(raw, max_length=254).strip()
    try:
        return validate_email(value, check_deliverability=False).normalized
    except EmailNotValidError as error:
        raise Invalid(f"must be a valid email address ({error})") from None


def clean_sku(raw: object) -> str:
    """A form's product code, by the API's own pattern (``Sku``), which admits no NUL."""
    if not isinstance(raw, str) or not re.fullmatch(SKU, raw):
        raise Invalid(MESSAGES["sku"])
    return raw


def clean_quantity(raw: object) -> int:
    """A form's quantity: up to three digits, 1..99 (the API's is a JSON integer, ``Quantity``)."""
    value = raw.strip() if isinstance(raw, str) else ""
    if not (value.isascii() and value.isdigit() and len(value) <= 3 and 1 <= int(value) <= MAX_QUANTITY):
        raise Invalid(MESSAGES["quantity"])
    return int(value)


def clean_dollars(raw: object) -> int | None:
    """A form's amount like "14.00" or "14" in cents; empty means all that is left."""
    value = clean_text(raw if raw is not None else "", max_length=20).strip()
    if not value:
        return None
    if not _DOLLARS.fullmatch(value):
        raise Invalid("must be an amount like 14.00")
    whole, _, fraction = value.partition(".")
    cents = int(whole) * 100 + int((fraction + "00")[:2])
    if not 0 < cents <= MAX_CENTS:
        raise Invalid(MESSAGES["amount_cents"])
    return cents


def clean_reason(raw: object) -> str:
    return "" if raw is None else clean_text(raw, max_length=200).strip()


DEFAULT_CARD = "4242424242424242"  # a payment sent without a card pays with the gateway's success test card


def clean_card_or_default(raw: object) -> str:
    return DEFAULT_CARD if raw is None else clean_card_number(raw)


# --- requests: each rule once, as a constraint the document publishes --------------------------

# A field's refusal, whichever of its constraints a value broke (a JSON value is never coerced). Keyed by the field's
# name: a field of that name means the same thing in every request model (the cart's quantity is an order's).
MESSAGES = {
    "sku": "must be a product code like MUG-01",
    "quantity": f"must be a whole number from 1 to {MAX_QUANTITY}",
    "items": f"must be a list of 1 to {MAX_LINES} lines",
    "amount_cents": f"must be a whole number of cents from 1 to {MAX_CENTS}",
    "orderId": "must be your own reference for the order: 1 to 64 visible ASCII characters",
    "amount": f"must be a whole number of minor units from 1 to {MAX_PAYMENT_AMOUNT:,}",
    "currency": "must be one of " + ", ".join(get_args(Currency)),
}


def omittable(schema: dict[str, Any]) -> None:
    """A field a body may leave out: the document gives the value's own rules (a null is read as not sent)."""
    schema.pop("default", None)
    schema.update(next(choice for choice in schema.pop("anyOf", [{}]) if choice.get("type") != "null"))


Sku = Annotated[str, Field(strict=True, max_length=32, pattern=f"^{SKU}$", examples=["MUG-01"])]
Quantity = Annotated[int, Field(strict=True, ge=1, le=MAX_QUANTITY)]
CARD = "The card's number: digits, spaces or dashes; Luhn-valid."


class Request(BaseModel):
    model_config = ConfigDict(frozen=True)


@dataclass(frozen=True)
class RequestedLine:
    index: int  # its place in the request, so an error found later names the right item
    sku: str
    quantity: int


class OrderLine(Request):
    sku: Sku
    quantity: Quantity


class OrderRequest(Request):
    items: Annotated[list[OrderLine], Field(min_length=1, max_length=MAX_LINES)]
    email: Annotated[str, Field(max_length=254, json_schema_extra={"format": "email"}), BeforeValidator(clean_email)]
    card_number: Annotated[str, Field(description=CARD), BeforeValidator(clean_card_number)]

    def lines(self) -> tuple[RequestedLine, ...]:
        return tuple(RequestedLine(index, line.sku, line.quantity) for index, line in enumerate(self.items))

    def normalized(self) -> dict[str, Any]:
        """What the fingerprint covers: the validated body, the card as digits."""
        return self.model_dump(exclude_none=True)


class RefundRequest(Request):
    amount_cents: Annotated[
        Annotated[int, Field(strict=True, ge=1, le=MAX_CENTS)] | None,
        Field(description="Default: everything that is left to refund.", json_schema_extra=omittable),
    ] = None
    reason: Annotated[str, Field(max_length=200), BeforeValidator(clean_reason)] = ""


class PaymentRequest(Request):
    order_ref: Annotated[
        str,
        Field(
            strict=True,
            min_length=1,
            max_length=64,
            pattern="^[!-~]{1,64}$",
            alias="orderId",
            description="Your own reference for the order: 1 to 64 visible ASCII characters.",
            examples=["order-123"],
        ),
    ]
    amount: Annotated[
        int,
        Field(
            strict=True, ge=1, le=MAX_PAYMENT_AMOUNT, description="In minor units (kopiyky, cents).", examples=[49900]
        ),
    ]
    currency: Currency
    card_number: Annotated[
        str,
        # Sent without one, the gateway's success test card pays: a default the document does not publish.
        Field(description="Optional. " + CARD, validate_default=True, json_schema_extra=omittable),
        BeforeValidator(clean_card_or_default),
    ] = None  # type: ignore[assignment]  # validate_default: the parser turns it into the default card

    def normalized(self) -> dict[str, Any]:
        """What the fingerprint covers: the validated body, the card as digits, the default card filled in."""
        return self.model_dump(by_alias=True)


M = TypeVar("M", bound=Request)


def field_errors(error: ValidationError) -> Errors:
    """pydantic's errors as this shop's: per field (``items[0].sku``), the shop's own message for each."""
    errors: Errors = {}
    for found in error.errors(include_url=False):
        name = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in found["loc"]).lstrip(".")
        if found["type"] == "value_error":
            message = str(found["ctx"]["error"])
        elif found["type"] == "missing":
            message = "is required"
        elif found["type"].endswith(("model_type", "dict_type")):
            message = "must be a JSON object"
        else:
            message = MESSAGES.get(str(found["loc"][-1]) if found["loc"] else "", found["msg"])
        errors.setdefault(name or "body", []).append(message)
    return errors


def parse(model: type[M], body: object, title: str) -> M:
    """The body as ``model``, or a 422 with the errors per field (nothing stored: the key stays usable)."""
    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise Refusal(422, title, "Some fields are invalid.", errors=field_errors(error)) from None


def parse_order(body: object, customer_id: int | None = None) -> OrderRequest:
    """An order body; its errors in one answer: the fields', a product sent twice, and the SKUs the catalog does
    not know (read only when there is an error to report; a valid order is priced inside its claim)."""
    order, errors = None, {}
    try:
        order = OrderRequest.model_validate(body)
    except ValidationError as error:
        errors = field_errors(error)
    lines, seen = [], set()
    for line in order.lines() if order is not None else _well_formed_lines(body, errors):
        if line.sku in seen:
            errors[f"items[{line.index}].sku"] = ["appears more than once; send one line per product"]
        else:
            lines.append(line)
        seen.add(line.sku)
    if errors:
        unknown = price(lines, customer_id)[1]  # the SKUs not offered to this customer
        raise Refusal(422, "Invalid order", "Some fields are invalid.", errors={**errors, **unknown})
    assert order is not None
    return order


def _well_formed_lines(body: object, errors: Errors) -> list[RequestedLine]:
    """The lines of an invalid body whose SKU is well formed, to check it against the catalog too (only the
    SKU is looked up: a line whose quantity is wrong still learns whether its product exists)."""
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list) or "items" in errors:
        return []
    return [
        RequestedLine(index, clean_sku(item["sku"]), 1)
        for index, item in enumerate(items)
        if f"items[{index}]" not in errors and f"items[{index}].sku" not in errors
    ]


# --- answers -------------------------------------------------------------------------------

Cents = Annotated[int, Field(ge=0)]


class Answer(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    @classmethod
    def of(cls, view: object) -> Self:
        """The answer for a view of the shop's rows: each field is the view's attribute of that name, or of the
        field's ``validation_alias`` (``id`` is the row's ``public_id``)."""
        return cls.model_validate(view)

    def to_bytes(self) -> bytes:
        """The exact bytes sent, and stored for a replay."""
        return self.__pydantic_serializer__.to_json(self)


class Product(Answer):
    sku: str
    name: str
    price_cents: Cents
    currency: str
    stock: Cents


class OrderItem(Answer):
    sku: str
    quantity: int
    unit_price_cents: Cents


class Refund(Answer):
    id: Annotated[str, Field(pattern="^re_", validation_alias="public_id")]
    order_id: Annotated[str, Field(validation_alias="order_public_id")]
    amount_cents: Cents
    currency: str
    reason: str
    status: Annotated[str, WithJsonSchema({"enum": [REFUND_PENDING, REFUND_SUCCEEDED]})]
    created_at: datetime


class Order(Answer):
    id: Annotated[str, Field(pattern="^ord_", validation_alias="public_id")]
    status: Annotated[str, WithJsonSchema({"enum": list(ORDER_STATES)})]
    items: list[OrderItem]
    total_cents: Cents
    currency: str
    email: str
    card_last4: str
    charge_id: str | None
    refunded_cents: Cents
    refunds: list[Refund]
    created_at: datetime


class Payment(Answer):
    id: Annotated[str, Field(pattern="^pay_", validation_alias="public_id")]
    order_id: Annotated[str, Field(description="Your `orderId`.", validation_alias="order_ref")]
    amount: Annotated[int, Field(ge=1, le=MAX_PAYMENT_AMOUNT)]
    currency: Currency
    status: Annotated[str, WithJsonSchema({"enum": list(PAYMENT_STATES)})]
    charge_id: str | None
    created_at: datetime


class OrdersQuery(BaseModel):
    """``GET /api/orders``'s query."""

    idempotency_key: Annotated[
        str | None, Field(description="Only the order this key placed (zero or one), for a client unsure of it.")
    ] = None


# --- problems (RFC 9457): what every refusal's body holds ------------------------------------


class Problem(Answer):
    type: Annotated[str, Field(description="A short token, e.g. `idempotency-key-reused`.")]
    title: str
    status: int
    detail: str


class RetryProblem(Problem):
    """Not an outcome: nothing is stored; retry after ``Retry-After`` seconds with the same key."""

    idempotency_key: str | None = None
    order_id: Annotated[
        str | None, Field(description="The order it placed, or the order a refund is for; a payment's: your `orderId`.")
    ] = None
    refund_id: str | None = None
    payment_id: str | None = None


class PaymentProblem(Problem):
    id: Annotated[str | None, Field(description="`order-already-paid`: the payment that paid it.")] = None
    payment_id: str | None = None
    order_id: Annotated[str | None, Field(description="Your `orderId`.")] = None
    idempotency_key: str | None = None


class OrderProblem(Problem):
    order_id: str | None = None


class InvalidProblem(Problem):
    errors: Annotated[
        dict[str, list[str]] | None, Field(description="Per field (`items[0].sku` style): what is wrong with it.")
    ] = None
    skus: list[str] | None = None
    order_id: str | None = None
    refundable_cents: Cents | None = None
