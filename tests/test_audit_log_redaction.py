"""The audit log's last scrub: it redacts whatever can be a card number, in any field, and nothing
else (an idempotency key whose hex segments hold long runs of digits is logged whole)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import given, settings
from hypothesis import strategies as st

from checkout.audit import AuditEvent, line_of, record_of, scrubbed_line
from tests.helpers import GOOD_CARD, order_body, post_order

# UUID-like keys whose digits, read across the dashes or inside a segment, run 13 to 19 long.
HEX_KEYS = [
    "c85824c2-1234-5678-9012-af5cb7d7af16",  # 2-1234-5678-9012: 13 digits across three dashes
    "0f3e1234-5678-4012-8345-678901234567",  # 28 digits from the first segment's tail to the end
    "a1234567890123456b-key-of-a-client",  # 16 digits inside one token
]


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "checkout_audit"]


@pytest.mark.parametrize("key", HEX_KEYS)
def test_a_key_whose_hex_holds_long_digit_runs_is_logged_whole(
    app: Flask, client: FlaskClient, caplog: pytest.LogCaptureFixture, key: str
) -> None:
    caplog.set_level(logging.INFO, logger="checkout_audit")
    assert post_order(client, key, order_body()).status_code == 201
    lines = audit_lines(caplog)
    assert lines and all(line["key"] == key for line in lines)
    assert not any("[redacted]" in json.dumps(line) for line in lines)


def event_with(**fields: Any) -> AuditEvent:
    return {
        "created_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "customer": "cus_demo_alice",
        "endpoint": "POST /api/orders",
        "key": "0f3e8a5c-1d2b-4c3a-9e8f-7a6b5c4d3e2f",
        "name": "claimed",
        "worker": "host:1",
        "detail": {},
        **fields,
    }


CARDS = ["4242424242424242", "4242 4242 4242 4242", "4242-4242-4242-4242", "4000000000000002", "378282246310005"]


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize(
    "where",
    ["key", "customer", "detail value", "detail key", "nested detail", "after a line break", "an integer", "in a key"],
)
def test_a_card_number_in_any_field_is_redacted(card: str, where: str) -> None:
    digits = card.replace(" ", "").replace("-", "")
    choices: dict[str, dict[str, Any]] = {
        "key": {"key": card},
        "customer": {"customer": card},
        "detail value": {"detail": {"order_id": f"card {card}."}},
        "detail key": {"detail": {card: "x"}},
        "nested detail": {"detail": {"why": [{"text": f"({card})"}]}},
        "after a line break": {"detail": {"why": f"line\n{card}\ttab"}},
        "an integer": {"detail": {"amount_cents": int(digits)}},
        "in a key": {"key": f"order-{card}-retry"},
    }
    line = line_of(event_with(**choices[where]))
    assert digits not in line and card not in line
    assert "[redacted]" in line
    json.loads(line)  # still one JSON document


def test_a_card_number_typed_in_a_key_never_reaches_the_log(
    app: Flask, client: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="checkout_audit")
    key = f"pay-{GOOD_CARD.replace(' ', '')}-1"
    assert post_order(client, key, order_body()).status_code == 201
    lines = [r.getMessage() for r in caplog.records if r.name == "checkout_audit"]
    assert lines and all("4242424242424242" not in line for line in lines)


def test_an_id_whose_hex_is_all_digits_is_logged_whole() -> None:
    order_id = "ord_" + "1234567890" * 2  # secrets.token_hex(10) can come out all digits
    line = json.loads(line_of(event_with(detail={"order_id": order_id, "charge_id": "ch_" + "0" * 20})))
    assert line["order"] == order_id and line["charge"] == "ch_" + "0" * 20


# Text made of what matters to the redaction: digits, its separators, letters and what JSON escapes.
pieces = [
    "4242",
    "4242 ",
    "4242-",
    "424242424",
    "0",
    "7",
    " ",
    "-",
    "--",
    "a",
    "n",
    "_",
    "\n",
    "\t",
    '"',
    "\\",
    "\u00e9",
]
texts = st.lists(st.sampled_from(pieces), max_size=12).map("".join) | st.from_regex(
    r"[a_\n\"\\ -]?([0-9][ -]?){11,20}[a_\n\"\\ -]?", fullmatch=True
)
values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**20), max_value=10**20) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


@pytest.mark.slow
@settings(max_examples=300)
@given(key=texts, customer=texts, detail=st.dictionaries(texts, values, max_size=4))
def test_a_line_that_skips_the_scrub_is_the_line_the_scrub_would_write(
    key: str, customer: str, detail: dict[str, Any]
) -> None:
    event = event_with(key=key, customer=customer, detail=detail)
    assert json.loads(line_of(event)) == json.loads(scrubbed_line(record_of(event)))


def test_a_number_whose_own_str_hides_its_digits_is_redacted_as_json_writes_it() -> None:
    class Quiet(int):
        def __str__(self) -> str:
            return "a number"

    line = line_of(event_with(detail={"amount_cents": Quiet(4242424242424242)}))
    assert "4242424242424242" not in line and "[redacted]" in line
