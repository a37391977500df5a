"""Hostile Gateway-Signature headers: whatever the header holds, the answer is a 400 problem+json and
nothing is written (never a 500 from a number too long to convert, or a digest that is not hex)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from checkout.database import utcnow
from tests.helpers import post_webhook, signed_post, writes_nothing

EVENT = json.dumps({"id": "evt_hostile", "type": "charge.succeeded", "data": {"reference": "ord_none"}}).encode()


def assert_refused_as_a_bad_signature(app: Flask, client: FlaskClient, signature: str) -> None:
    """The event under this Gateway-Signature header: a 400 bad-signature problem, and not a row written."""
    with writes_nothing(app):
        response = post_webhook(client, EVENT, signature)
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    assert response.get_json()["type"] == "bad-signature"


def test_a_signature_timestamp_of_five_thousand_digits_is_400_and_writes_nothing(
    app: Flask, client: FlaskClient
) -> None:
    assert_refused_as_a_bad_signature(app, client, f"t={'9' * 5000},v1={'0' * 64}")


@pytest.mark.parametrize(
    "digest", ["é" * 64, "zz" * 32, "0" * 63, "0" * 6000], ids=["not ascii", "not hex", "too short", "too long"]
)
def test_a_signature_digest_that_is_not_64_hex_digits_is_400_and_writes_nothing(
    app: Flask, client: FlaskClient, digest: str
) -> None:
    assert_refused_as_a_bad_signature(app, client, f"t={int(utcnow().timestamp())},v1={digest}")


@pytest.mark.parametrize(
    "event",
    [
        [],
        {"id": "", "type": "charge.succeeded", "data": {}},
        {"id": "e" * 41, "type": "charge.succeeded", "data": {}},
        {"id": "evt_1", "type": 7, "data": {}},
        {"id": "evt_1", "type": "charge.succeeded", "data": {"reference": 12}},
        {"id": "evt_1", "type": "charge.succeeded"},
        {"id": "evt_\u0000", "type": "charge.succeeded", "data": {}},
        {"id": "evt_1", "type": "charge.succeeded", "data": {"id": "ch_\u0000", "reference": "ord_1"}},
        {"id": "evt_1", "type": "charge.succeeded", "data": {"id": "c" * 33, "reference": "ord_1"}},
    ],
    ids=[
        "not an object",
        "empty id",
        "id too long",
        "type not text",
        "reference not text",
        "no data",
        "NUL in id",
        "NUL in the charge id",
        "charge id longer than its column",
    ],
)
def test_a_signed_body_that_is_not_the_documents_gateway_event_is_400_and_writes_nothing(
    app: Flask, client: FlaskClient, event: Any
) -> None:
    with writes_nothing(app):
        response = signed_post(client, event)
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    assert response.get_json()["title"] == "Malformed event"


def test_a_signed_event_whose_unread_fields_are_unusual_is_still_received(app: Flask, client: FlaskClient) -> None:
    """Fields the shop never reads are not checked: a delivery refused for one would be retried forever."""
    odd = {"id": "evt_odd", "type": "payout.created", "created": "soon", "data": {"amount_cents": -3, "currency": 840}}
    response = signed_post(client, odd)
    assert response.status_code == 200 and response.get_json() == {"event": "evt_odd", "result": "ignored"}
