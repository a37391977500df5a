"""What identifies a request: the key it carries, and the fingerprint stored with it.

A key is 16 to 255 visible ASCII characters, perhaps in double quotes (a structured-field string). A comma outside
quotes means several keys (merged header lines): refused, since a retry carrying only one of them would pay again.
Design: docs/design.md#checkoutidempotencykeyspy-the-key-and-the-fingerprint
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from typing import Any

_KEY = re.compile(r"[\x21-\x7e]{16,255}")


class InvalidKey(ValueError):
    """Base for key problems."""


class MissingKey(InvalidKey):
    pass


class MalformedKey(InvalidKey):
    pass


class SeveralKeys(InvalidKey):
    pass


def parse_key(raw: str | None) -> str:
    """Return the key a client sent, or raise MissingKey / MalformedKey / SeveralKeys."""
    if raw is None or not raw.strip():
        raise MissingKey("an Idempotency-Key is required")
    value = raw.strip()
    if value.startswith('"'):
        value, rest = _quoted(value)
        if rest.strip():
            if rest.lstrip().startswith(","):
                raise SeveralKeys("send exactly one Idempotency-Key header")
            raise MalformedKey("unexpected text after a quoted Idempotency-Key")
    elif "," in value:
        raise SeveralKeys("send exactly one Idempotency-Key header")
    if not _KEY.fullmatch(value):
        raise MalformedKey("an Idempotency-Key is 16 to 255 visible ASCII characters")
    return value


def _quoted(text: str) -> tuple[str, str]:
    """Parse an sf-string at the start of ``text``; its value and what follows it."""
    out: list[str] = []
    index = 1
    while index < len(text):
        char = text[index]
        if char == "\\":
            escaped = text[index + 1 : index + 2]
            if escaped not in ('"', "\\"):
                raise MalformedKey("invalid escape in a quoted Idempotency-Key")
            out.append(escaped)
            index += 2
        elif char == '"':
            return "".join(out), text[index + 1 :]
        else:
            out.append(char)
            index += 1
    raise MalformedKey("a quoted Idempotency-Key has no closing quote")


def fingerprint(secret: str | bytes, method: str, endpoint: str, payload: Mapping[str, Any]) -> str:
    """A retry must be the same request: an HMAC of the method, the endpoint and the validated, normalised
    body, under a secret of its own (not SECRET_KEY), since the body covers a card number that must never be
    recoverable from what is stored."""
    canonical = json.dumps(
        {"method": method.upper(), "endpoint": endpoint, "body": payload},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()
