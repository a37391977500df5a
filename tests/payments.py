"""Helpers for the tests of POST /api/payments, the articles' own request."""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout.extensions import db
from checkout.shop.models import Payment
from tests.helpers import ALICE, Ledger


def new_key() -> str:
    return str(uuid.uuid4())


def payment_body(card: str | None = None, **changes: Any) -> dict[str, Any]:
    """The articles' body (an orderId of its own per call, unless ``orderId`` is given), with a card if named."""
    body: dict[str, Any] = {"orderId": f"order-{uuid.uuid4().hex[:12]}", "amount": 49900, "currency": "UAH"}
    if card is not None:
        body["card_number"] = card
    body.update(changes)
    return body


def post_payment(client: FlaskClient, key: str | None, body: Any, headers: dict[str, str] | None = None) -> Any:
    """POST /api/payments as alice (unless ``headers`` say otherwise), with ``key`` if given."""
    request_headers = {**ALICE, **(headers or {})}
    if key is not None:
        request_headers["Idempotency-Key"] = key
    return client.post("/api/payments", json=body, headers=request_headers)


def payments_of(ledger: Ledger, *where: Any) -> list[Payment]:
    return ledger.rows(Payment, *where)


def claim_payment_as_a_dying_worker(app: Flask, key: str, body: dict[str, Any], *, lease_seconds: float = 30) -> object:
    """Do what POST /api/payments does for alice up to its first phase (the payment row exists), then die."""
    from checkout.extensions import once
    from checkout.idempotency import Scope, Settings
    from checkout.idempotency.edge import keyed_fingerprint
    from checkout.idempotency.engine import Asked, begin
    from checkout.shop.models import Customer
    from checkout.shop.payment import gateway
    from checkout.shop.payments import API_PAYMENTS, ApiPaymentResponder, PaymentRequest, PlacePayment
    from checkout.shop.schemas import PaymentRequest as PaymentBody
    from checkout.shop.schemas import parse

    with app.app_context():
        parsed = parse(PaymentBody, body, "Invalid payment")
        customer_id = db.session.scalar(sa.select(Customer.id).where(Customer.public_id == "cus_demo_alice"))
        assert customer_id is not None
        operation = begin(
            Asked(
                once.store,
                Scope("cus_demo_alice", API_PAYMENTS, key),
                keyed_fingerprint(API_PAYMENTS, parsed.normalized()),
                PlacePayment(PaymentRequest(customer_id, key, parsed), ApiPaymentResponder(), gateway()).phases(),
                Settings(lease_seconds=lease_seconds),
            )
        )
        db.session.remove()
    return operation
