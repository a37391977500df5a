"""GET /api/openapi.json: the JSON API described in OpenAPI 3.1, for clients and for schemathesis.

Written by hand, next to the code it describes, and kept honest by two checks:
openapi-spec-validator validates the document in the tests, and .ci/run lets
schemathesis send a few hundred generated requests to a live server and
compare every answer (status, headers, body) with it.

In production the document names neither the demo customers' tokens nor the
test cards: there are no demo customers there, and a published card list
would only invite probing.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app

from checkout import __version__
from checkout.errors import json_bytes
from checkout.shop.models import (
    MAX_PAYMENT_AMOUNT,
    MAX_QUANTITY,
    ORDER_STATES,
    PAYMENT_CURRENCIES,
    PAYMENT_STATES,
    REFUND_PENDING,
    REFUND_SUCCEEDED,
)
from checkout.shop.parsing import MAX_CENTS, MAX_LINES

bp = Blueprint("openapi", __name__)

JSON = "application/json"
PROBLEM = "application/problem+json"


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"$ref": f"#/components/{kind}/{name}"}


def _problem(description: str, *types: str, schema: str = "Problem", headers: tuple[str, ...] = ()) -> dict[str, Any]:
    """A problem+json answer; ``types`` are the problem types this status can carry here."""
    text = description + (" Problem types: " + ", ".join(f"`{t}`" for t in types) + "." if types else "")
    answer: dict[str, Any] = {"description": text, "content": {PROBLEM: {"schema": _ref("schemas", schema)}}}
    if headers:
        answer["headers"] = {name: _ref("headers", name) for name in headers}
    return answer


def _json(description: str, schema: dict[str, Any], headers: tuple[str, ...] = ()) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": description, "content": {JSON: {"schema": schema}}}
    if headers:
        answer["headers"] = {name: _ref("headers", name) for name in headers}
    return answer


UNAUTHORIZED = _problem("No token, or not a known one.", "unauthorized", headers=("WWW-Authenticate",))
TOO_MANY = _problem("Too many requests from this client (`CHECKOUT_RATE_LIMIT`).", "too-many-requests",
                    headers=("Retry-After",))  # fmt: skip
NOT_FOUND = _problem("No such resource for this customer.", "not-found")
# Every route: a query parameter holding a NUL is refused before any view (checkout.security): no database stores one.
BAD_QUERY = _problem("A query parameter holds a NUL character. Nothing was read or written.", "bad-request")
BODY_ERRORS = {
    "413": _problem("The body is over 64 KiB.", "payload-too-large"),
    "415": _problem("The body is not `application/json`.", "unsupported-media-type"),
}
IDEMPOTENT_ANSWERS = {
    "400": _problem(
        "The Idempotency-Key is missing, malformed (16 to 255 visible ASCII characters, optionally in double "
        "quotes), or sent more than once; or the JSON is malformed. Nothing is stored.",
        "invalid-idempotency-key",
        "malformed-json",
        "bad-request",
    ),
    "409": _problem(
        "A request with this key is still being processed (after waiting as long as `Prefer: wait` asked). "
        "Nothing is stored; retry after `Retry-After` seconds with the same key.",
        "idempotency-request-in-progress",
        schema="RetryProblem",
        headers=("Retry-After",),
    ),
    "503": _problem(
        "The outcome is not known yet (the gateway is down, or its answer was lost). Nothing is stored as the "
        "outcome; a retry with the same key resumes and never charges twice.",
        "payment-unconfirmed",
        "service-unavailable",
        schema="RetryProblem",
        headers=("Retry-After",),
    ),
}


PAYMENT_ANSWERS = {
    "400": IDEMPOTENT_ANSWERS["400"],
    "409": _problem(
        "A request with this key is still being processed (`idempotency-request-in-progress`, after waiting as "
        "long as `Prefer: wait` asked), or another key is paying this `orderId` right now "
        "(`order-payment-in-progress`): nothing is stored, retry after `Retry-After` seconds with the same key. "
        "Or the `orderId` is already paid (`order-already-paid`, with the existing payment as `id` and "
        "`payment_id`): a final answer, stored under this key and replayed.",
        "idempotency-request-in-progress",
        "order-payment-in-progress",
        "order-already-paid",
        schema="PaymentProblem",
        headers=("Retry-After", "Idempotent-Replayed"),
    ),
    "503": IDEMPOTENT_ANSWERS["503"],
}


def _card_number(production: bool) -> dict[str, Any]:
    """The card field; outside production, with the test cards that drive the mock gateway."""
    if production:
        return {"type": "string", "description": "The card's number: digits, spaces or dashes; Luhn-valid."}
    return {
        "type": "string",
        "description": "A test card (digits, spaces or dashes; Luhn-valid): 4242 4242 4242 4242 "
        "succeeds, 4000 0000 0000 0002 declines, …0119 fails once, …0259 loses its first answer, "
        "…0077 is slow.",
        "examples": ["4242 4242 4242 4242"],
    }


def _payment_card(production: bool) -> dict[str, Any]:
    """A payment's card is optional: without one, the gateway's success test card pays."""
    card = _card_number(production)
    card["description"] = "Optional. " + card["description"]
    if not production:
        card["description"] += " Without it: 4242 4242 4242 4242."
    return card


def document(*, production: bool = False) -> dict[str, Any]:
    """The whole description (a fresh dict each time: callers may keep or change it)."""
    key_parameter = _ref("parameters", "IdempotencyKey")
    prefer_parameter = _ref("parameters", "Prefer")
    order_id = _ref("parameters", "OrderId")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Checkout API",
            "version": __version__,
            "summary": "A shop's JSON API whose payments and refunds happen once, whatever is retried.",
            "description": (
                "Every POST that moves money takes an `Idempotency-Key` (16 to 255 visible ASCII characters; "
                "one per operation, the same on every retry of it). The first answer that is an outcome "
                "(201, 402, or a final 422) is stored with the key and replayed byte for byte with "
                "`Idempotent-Replayed: true`. A key is scoped to the customer and the endpoint, and bound "
                "to the request by a fingerprint: the same key with another body is 422 "
                "`idempotency-key-reused`. Errors are `application/problem+json` (RFC 9457); problem types "
                "are short tokens."
            ),
            "license": {"name": "MIT", "identifier": "MIT"},
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "tags": [
            {"name": "catalog"},
            {"name": "orders", "description": "Payments: POST is idempotent."},
            {"name": "refunds", "description": "A second idempotent endpoint: keys are scoped to it."},
            {
                "name": "payments",
                "description": "The articles' own request: a payment for your `orderId`, once per key, and one "
                "succeeded payment per `orderId`.",
            },
            {"name": "webhooks", "description": "What the payment gateway posts to the shop."},
        ],
        "paths": {
            "/api/products": {
                "get": {
                    "operationId": "listProducts",
                    "tags": ["catalog"],
                    "summary": "The catalog, with today's prices and stock",
                    "security": [],
                    "responses": {
                        "200": _json("The products.", {"type": "array", "items": _ref("schemas", "Product")}),
                        "400": BAD_QUERY,
                        "429": TOO_MANY,
                    },
                }
            },
            "/api/orders": {
                "get": {
                    "operationId": "listOrders",
                    "tags": ["orders"],
                    "summary": "Your orders, newest first",
                    "parameters": [
                        {
                            "name": "idempotency_key",
                            "in": "query",
                            "required": False,
                            "description": "Only the order this key placed (zero or one): a client unsure of an "
                            "outcome can look it up.",
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {
                        "200": _json("The orders.", {"type": "array", "items": _ref("schemas", "Order")}),
                        "400": BAD_QUERY,
                        "401": UNAUTHORIZED,
                        "429": TOO_MANY,
                    },
                },
                "post": {
                    "operationId": "placeOrder",
                    "tags": ["orders"],
                    "summary": "Place and pay an order, once per Idempotency-Key",
                    "parameters": [key_parameter, prefer_parameter],
                    "requestBody": {
                        "required": True,
                        "content": {JSON: {"schema": _ref("schemas", "OrderRequest")}},
                    },
                    "responses": {
                        "201": _json(
                            "Paid. Stored under the key: a replay is this answer, byte for byte, with "
                            "`Idempotent-Replayed: true`.",
                            _ref("schemas", "Order"),
                            headers=("Location", "Idempotent-Replayed", "Preference-Applied"),
                        ),
                        "202": _json(
                            "Accepted, as `Prefer: respond-async` asked: the order is still being paid, or its "
                            "outcome is not known yet (where the answer would be 409 or 503). Nothing is stored; "
                            "poll `Location`, which shows `pending` until the outcome.",
                            _ref("schemas", "Order"),
                            headers=("Location", "Retry-After", "Preference-Applied"),
                        ),
                        "402": _problem(
                            "Declined, or abandoned and ended by reconcile. A final outcome: stored and replayed.",
                            "card-declined",
                            "payment-abandoned",
                            schema="OrderProblem",
                            headers=("Idempotent-Replayed",),
                        ),
                        **IDEMPOTENT_ANSWERS,
                        "401": UNAUTHORIZED,
                        **BODY_ERRORS,
                        "422": _problem(
                            "The key was used with another body (`idempotency-key-reused`, the stored record is "
                            "untouched); the body is invalid (`validation-error` with `errors` per field; "
                            "nothing stored, the key stays usable); or not enough stock (`out-of-stock` with "
                            "`skus`; stored and replayed).",
                            "idempotency-key-reused",
                            "validation-error",
                            "out-of-stock",
                            schema="InvalidProblem",
                            headers=("Idempotent-Replayed",),
                        ),
                        "429": TOO_MANY,
                    },
                },
            },
            "/api/orders/{order_id}": {
                "get": {
                    "operationId": "getOrder",
                    "tags": ["orders"],
                    "summary": "One of your orders",
                    "parameters": [order_id],
                    "responses": {
                        "200": _json("The order.", _ref("schemas", "Order")),
                        "400": BAD_QUERY,
                        "401": UNAUTHORIZED,
                        "404": NOT_FOUND,
                        "429": TOO_MANY,
                    },
                }
            },
            "/api/orders/{order_id}/refunds": {
                "post": {
                    "operationId": "refundOrder",
                    "tags": ["refunds"],
                    "summary": "Refund part or all of a paid order, once per Idempotency-Key",
                    "description": "The key's scope is this endpoint (the route template) and the fingerprint "
                    "covers the order id: a key used for a payment is unrelated here, and one key sent for "
                    "refunds of two orders is 422 `idempotency-key-reused`.",
                    "parameters": [order_id, key_parameter, prefer_parameter],
                    "requestBody": {
                        "required": False,
                        "content": {JSON: {"schema": _ref("schemas", "RefundRequest")}},
                    },
                    "responses": {
                        "201": _json(
                            "Refunded. Stored under the key and replayed.",
                            _ref("schemas", "Refund"),
                            headers=("Location", "Idempotent-Replayed", "Preference-Applied"),
                        ),
                        **IDEMPOTENT_ANSWERS,
                        "401": UNAUTHORIZED,
                        "404": NOT_FOUND,
                        **BODY_ERRORS,
                        "422": _problem(
                            "The key was used with another request; the body is invalid (nothing stored); the "
                            "order was never paid (`order-not-refundable`, nothing stored); or more than is left "
                            "(`refund-exceeds-charge` with `refundable_cents`, stored and replayed).",
                            "idempotency-key-reused",
                            "validation-error",
                            "order-not-refundable",
                            "refund-exceeds-charge",
                            schema="InvalidProblem",
                            headers=("Idempotent-Replayed",),
                        ),
                        "429": TOO_MANY,
                    },
                }
            },
            "/api/orders/{order_id}/refunds/{refund_id}": {
                "get": {
                    "operationId": "getRefund",
                    "tags": ["refunds"],
                    "summary": "One refund of one of your orders",
                    "parameters": [
                        order_id,
                        {"name": "refund_id", "in": "path", "required": True, "schema": {"type": "string"}},
                    ],
                    "responses": {
                        "200": _json("The refund.", _ref("schemas", "Refund")),
                        "400": BAD_QUERY,
                        "401": UNAUTHORIZED,
                        "404": NOT_FOUND,
                        "429": TOO_MANY,
                    },
                }
            },
            "/api/payments": {
                "post": {
                    "operationId": "pay",
                    "tags": ["payments"],
                    "summary": "Pay for your own order reference, once per Idempotency-Key",
                    "description": "The key's scope is this endpoint: a key used for an order is unrelated here. "
                    "The database holds at most one pending or succeeded payment per customer and `orderId`: "
                    "a new key for an order already paid is 409 `order-already-paid`; a declined or abandoned "
                    "attempt leaves the order free for another key.",
                    "parameters": [key_parameter, prefer_parameter],
                    "requestBody": {
                        "required": True,
                        "content": {JSON: {"schema": _ref("schemas", "PaymentRequest")}},
                    },
                    "responses": {
                        "201": _json(
                            "Paid. Stored under the key: a replay is this answer, byte for byte, with "
                            "`Idempotent-Replayed: true`.",
                            _ref("schemas", "Payment"),
                            headers=("Location", "Idempotent-Replayed", "Preference-Applied"),
                        ),
                        "202": _json(
                            "Accepted, as `Prefer: respond-async` asked: the payment is still in progress, or its "
                            "outcome is not known yet (where the answer would be 409 or 503). Nothing is stored; "
                            "poll `Location`, which shows `pending` until the outcome.",
                            _ref("schemas", "Payment"),
                            headers=("Location", "Retry-After", "Preference-Applied"),
                        ),
                        "402": _problem(
                            "Declined, or abandoned and ended by reconcile. A final outcome: stored and replayed; "
                            "the order may be paid with a new key.",
                            "card-declined",
                            "payment-abandoned",
                            schema="PaymentProblem",
                            headers=("Idempotent-Replayed",),
                        ),
                        **PAYMENT_ANSWERS,
                        "401": UNAUTHORIZED,
                        **BODY_ERRORS,
                        "422": _problem(
                            "The key was used with another body (`idempotency-key-reused`, the stored record is "
                            "untouched), or the body is invalid (`validation-error` with `errors` per field; "
                            "nothing stored, the key stays usable).",
                            "idempotency-key-reused",
                            "validation-error",
                            schema="InvalidProblem",
                        ),
                        "429": TOO_MANY,
                    },
                }
            },
            "/api/payments/{payment_id}": {
                "get": {
                    "operationId": "getPayment",
                    "tags": ["payments"],
                    "summary": "One of your payments (`pending` until its outcome is known)",
                    "parameters": [
                        {"name": "payment_id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": {
                        "200": _json("The payment.", _ref("schemas", "Payment")),
                        "400": BAD_QUERY,
                        "401": UNAUTHORIZED,
                        "404": NOT_FOUND,
                        "429": TOO_MANY,
                    },
                }
            },
            "/webhooks/gateway": {
                "post": {
                    "operationId": "receiveGatewayEvent",
                    "tags": ["webhooks"],
                    "summary": "A payment gateway event, delivered at least once, applied once",
                    "security": [],
                    "parameters": [
                        {
                            "name": "Gateway-Signature",
                            "in": "header",
                            "required": True,
                            "description": 't=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">, keyed '
                            "by the webhook secret; at most 300 s away from now.",
                            "schema": {"type": "string"},
                        }
                    ],
                    "requestBody": {"required": True, "content": {JSON: {"schema": _ref("schemas", "GatewayEvent")}}},
                    "responses": {
                        "200": _json(
                            "Received: applied, or a repeated delivery that changed nothing.",
                            {
                                "type": "object",
                                "required": ["event", "result"],
                                "properties": {
                                    "event": {"type": "string"},
                                    "result": {"enum": ["applied", "no change", "ignored", "duplicate"]},
                                },
                            },
                        ),
                        "400": _problem(
                            "A missing, bad or stale signature, or a body that is not an event: nothing applied.",
                            "bad-signature",
                            "bad-request",
                        ),
                        "413": BODY_ERRORS["413"],
                        "429": TOO_MANY,
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The customer's API token."
                    if production
                    else "The customer's API token (the demo customers: `demo-alice-token`, `demo-bob-token`).",
                }
            },
            "parameters": {
                "IdempotencyKey": {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": True,
                    "description": "One per operation, the same on every retry of it: 16 to 255 visible ASCII "
                    "characters (a UUID4 is a good choice), optionally as a quoted string (RFC 8941). A comma "
                    "separates header field values, so a key holding one reads as two keys: 400.",
                    "schema": {"type": "string", "minLength": 16, "maxLength": 257},
                },
                "Prefer": {
                    "name": "Prefer",
                    "in": "header",
                    "required": False,
                    "description": "RFC 7240. `wait=N`: if the key is in progress, wait up to min(N, 10) seconds "
                    "for its outcome before answering 409. `respond-async` (POST /api/orders and POST "
                    "/api/payments): where the answer would be 409 or 503, answer 202 Accepted with the "
                    "`Location` of the order or payment instead. Both may be sent: `respond-async, wait=5`.",
                    "schema": {"type": "string"},
                },
                "OrderId": {"name": "order_id", "in": "path", "required": True, "schema": {"type": "string"}},
            },
            "headers": {
                "Location": {"description": "Where the created resource is.", "schema": {"type": "string"}},
                "Idempotent-Replayed": {
                    "description": "`true` when this answer is the stored one, replayed.",
                    "schema": {"type": "string", "enum": ["true"]},
                },
                "Retry-After": {
                    "description": "Seconds to wait before retrying (with the same key).",
                    "schema": {"type": "string", "pattern": "^[0-9]+$"},
                },
                "Preference-Applied": {
                    "description": "The preferences honoured: `respond-async`, `wait=N`, or both.",
                    "schema": {"type": "string"},
                },
                "WWW-Authenticate": {"schema": {"type": "string"}},
            },
            "schemas": _schemas(production),
        },
    }


def _schemas(production: bool) -> dict[str, Any]:
    timestamp = {"type": "string", "format": "date-time"}
    cents = {"type": "integer", "minimum": 0}
    problem = {
        "type": "object",
        "required": ["type", "title", "status", "detail"],
        "properties": {
            "type": {"type": "string", "description": "A short token, e.g. `idempotency-key-reused`."},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
        },
    }
    return {
        "Problem": problem,
        "RetryProblem": {
            "allOf": [
                _ref("schemas", "Problem"),
                {
                    "type": "object",
                    "properties": {
                        "idempotency_key": {"type": "string"},
                        "order_id": {"type": "string"},
                        "refund_id": {"type": "string"},
                        "payment_id": {"type": "string"},
                    },
                },
            ]
        },
        "PaymentProblem": {
            "allOf": [
                _ref("schemas", "Problem"),
                {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "`order-already-paid`: the payment that paid it."},
                        "payment_id": {"type": "string"},
                        "order_id": {"type": "string", "description": "Your `orderId`."},
                        "idempotency_key": {"type": "string"},
                    },
                },
            ]
        },
        "OrderProblem": {
            "allOf": [_ref("schemas", "Problem"), {"type": "object", "properties": {"order_id": {"type": "string"}}}]
        },
        "InvalidProblem": {
            "allOf": [
                _ref("schemas", "Problem"),
                {
                    "type": "object",
                    "properties": {
                        "errors": {
                            "type": "object",
                            "description": "Per field (`items[0].sku` style): what is wrong with it.",
                            "additionalProperties": {"type": "array", "items": {"type": "string"}},
                        },
                        "skus": {"type": "array", "items": {"type": "string"}},
                        "order_id": {"type": "string"},
                        "refundable_cents": cents,
                    },
                },
            ]
        },
        "Product": {
            "type": "object",
            "required": ["sku", "name", "price_cents", "currency", "stock"],
            "properties": {
                "sku": {"type": "string"},
                "name": {"type": "string"},
                "price_cents": cents,
                "currency": {"type": "string"},
                "stock": cents,
            },
        },
        "OrderRequest": {
            "type": "object",
            "required": ["items", "email", "card_number"],
            "properties": {
                "items": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_LINES,
                    "items": {
                        "type": "object",
                        "required": ["sku", "quantity"],
                        "properties": {
                            "sku": {"type": "string", "examples": ["MUG-01"]},
                            "quantity": {"type": "integer", "minimum": 1, "maximum": MAX_QUANTITY},
                        },
                    },
                },
                "email": {"type": "string", "format": "email", "maxLength": 254},
                "card_number": _card_number(production),
                "purchase": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 64,
                    "pattern": "^[!-~]{1,64}$",
                    "description": "Your own name for this purchase (1 to 64 visible ASCII characters), the "
                    "same on every retry: the lab counts money per purchase.",
                },
            },
        },
        "OrderItem": {
            "type": "object",
            "required": ["sku", "quantity", "unit_price_cents"],
            "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}, "unit_price_cents": cents},
        },
        "Order": {
            "type": "object",
            "required": [
                "id",
                "status",
                "items",
                "total_cents",
                "currency",
                "email",
                "card_last4",
                "charge_id",
                "refunded_cents",
                "refunds",
                "created_at",
            ],
            "properties": {
                "id": {"type": "string", "pattern": "^ord_"},
                "status": {"enum": list(ORDER_STATES)},
                "items": {"type": "array", "items": _ref("schemas", "OrderItem")},
                "total_cents": cents,
                "currency": {"type": "string"},
                "email": {"type": "string"},
                "card_last4": {"type": "string"},
                "charge_id": {"type": ["string", "null"]},
                "refunded_cents": cents,
                "refunds": {"type": "array", "items": _ref("schemas", "Refund")},
                "created_at": timestamp,
            },
        },
        "RefundRequest": {
            "type": "object",
            "properties": {
                "amount_cents": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_CENTS,
                    "description": "Default: everything that is left to refund.",
                },
                "reason": {"type": "string", "maxLength": 200},
            },
        },
        "Refund": {
            "type": "object",
            "required": ["id", "order_id", "amount_cents", "currency", "reason", "status", "created_at"],
            "properties": {
                "id": {"type": "string", "pattern": "^re_"},
                "order_id": {"type": "string"},
                "amount_cents": cents,
                "currency": {"type": "string"},
                "reason": {"type": "string"},
                "status": {"enum": [REFUND_PENDING, REFUND_SUCCEEDED]},
                "created_at": timestamp,
            },
        },
        "PaymentRequest": {
            "type": "object",
            "required": ["orderId", "amount", "currency"],
            "properties": {
                "orderId": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 64,
                    "pattern": "^[!-~]{1,64}$",
                    "description": "Your own reference for the order: 1 to 64 visible ASCII characters.",
                    "examples": ["order-123"],
                },
                "amount": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_PAYMENT_AMOUNT,
                    "description": "In minor units (kopiyky, cents).",
                    "examples": [49900],
                },
                "currency": {"type": "string", "enum": list(PAYMENT_CURRENCIES)},
                "card_number": _payment_card(production),
            },
        },
        "Payment": {
            "type": "object",
            "required": ["id", "order_id", "amount", "currency", "status", "charge_id", "created_at"],
            "properties": {
                "id": {"type": "string", "pattern": "^pay_"},
                "order_id": {"type": "string", "description": "Your `orderId`."},
                "amount": {"type": "integer", "minimum": 1, "maximum": MAX_PAYMENT_AMOUNT},
                "currency": {"type": "string", "enum": list(PAYMENT_CURRENCIES)},
                "status": {"enum": list(PAYMENT_STATES)},
                "charge_id": {"type": ["string", "null"]},
                "created_at": timestamp,
            },
        },
        "GatewayEvent": {
            "type": "object",
            "required": ["id", "type", "created", "data"],
            "properties": {
                "id": {"type": "string", "maxLength": 40},
                "type": {"type": "string", "examples": ["charge.succeeded", "charge.failed", "refund.succeeded"]},
                "created": {"type": "integer"},
                "data": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "reference": {"type": "string"},
                        "gateway_key": {"type": "string"},
                        "amount_cents": cents,
                        "currency": {"type": "string"},
                        "status": {"type": "string"},
                    },
                },
            },
        },
    }


@bp.get("/api/openapi.json")
def openapi_json() -> Response:
    production = current_app.config["CHECKOUT_ENV"] == "production"
    return Response(json_bytes(document(production=production)), mimetype=JSON)
