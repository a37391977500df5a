"""What a key may look like, and what the fingerprint covers."""

from __future__ import annotations

import re

import pytest

from checkout.idempotency import fingerprint, parse_key
from checkout.idempotency.keys import MalformedKey, MissingKey, SeveralKeys


@pytest.mark.parametrize("raw", [None, "", "   "])
def test_a_missing_key_is_refused(raw: str | None) -> None:
    with pytest.raises(MissingKey):
        parse_key(raw)


@pytest.mark.parametrize(
    "raw", ["x" * 15, "x" * 256, "sixteen chars ok", "tab\there-0000000", "é" * 16, '"bad\\escape-1234567"']
)
def test_malformed_keys_are_refused(raw: str) -> None:
    with pytest.raises(MalformedKey):
        parse_key(raw)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("x" * 16, "x" * 16),
        ("x" * 255, "x" * 255),
        ("  9f1c0e0a-7d4b-4b9e-8d0e-1a2b3c4d5e6f ", "9f1c0e0a-7d4b-4b9e-8d0e-1a2b3c4d5e6f"),
        ('"9f1c0e0a-7d4b-4b9e-8d0e-1a2b3c4d5e6f"', "9f1c0e0a-7d4b-4b9e-8d0e-1a2b3c4d5e6f"),
        ('"quoted\\"inside-12345"', 'quoted"inside-12345'),
    ],
)
def test_valid_keys_are_16_to_255_visible_ascii_and_may_be_quoted(raw: str, key: str) -> None:
    assert parse_key(raw) == key


@pytest.mark.parametrize(
    "raw", ["first-key-0000001, second-key-000002", "a-key-with,a-comma-01", '"quoted-key-0000001", x']
)
def test_a_comma_outside_quotes_is_refused_saying_how_to_send_a_key_that_holds_one(raw: str) -> None:
    with pytest.raises(SeveralKeys, match="comma") as refused:
        parse_key(raw)
    assert "double quotes" in str(refused.value)
    assert parse_key('"a-key-with,a-comma-01"') == "a-key-with,a-comma-01"


def test_the_fingerprint_ignores_key_order_but_not_values() -> None:
    a = fingerprint("s", "POST", "/api/orders", {"email": "a@x.io", "card_number": "4242424242424242"})
    b = fingerprint("s", "post", "/api/orders", {"card_number": "4242424242424242", "email": "a@x.io"})
    c = fingerprint("s", "POST", "/api/orders", {"email": "b@x.io", "card_number": "4242424242424242"})
    assert a == b != c


def test_the_fingerprint_depends_on_the_secret_and_hides_the_card() -> None:
    body = {"card_number": "4242424242424242"}
    assert fingerprint("one", "POST", "/e", body) != fingerprint("two", "POST", "/e", body)
    # A keyed digest, nothing else: the body (and its card number) cannot be read back from it.
    assert re.fullmatch(r"[0-9a-f]{64}", fingerprint("one", "POST", "/e", body))
