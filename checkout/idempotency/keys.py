"""What identifies a request: the key it carries, and the fingerprint stored with it.

A key is 16 to 255 visible ASCII characters, perhaps in double quotes (a structured-field string). A comma outside
quotes means several keys (merged header lines): refused, since a retry carrying only one of them would pay again.
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
    if value.startswith('"'):  # an sf-string: its escapes are \" and \\ only
        quoted = _QUOTED.match(value)
        if quoted is None:
            raise MalformedKey("a quoted Idempotency-Key has no closing quote")
        if not _ESCAPED.fullmatch(quoted[1]):
            raise MalformedKey("invalid escape in a quoted Idempotency-Key")
        value, rest = re.sub(r"\\(.)", r"\1", quoted[1]), quoted[2].strip()
        if rest:
            raise SeveralKeys(_ONE) if rest.startswith(",") else MalformedKey("text after a quoted Idempotency-Key")
    elif "," in value:
        raise SeveralKeys(_ONE)
    if not _KEY.fullmatch(value):
        raise MalformedKey("an Idempotency-Key is 16 to 255 visible ASCII characters")
    return value


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"(.*)', re.DOTALL)
_ESCAPED = re.compile(r'(?:[^"\\]|\\["\\])*', re.DOTALL)  # inside the quotes: \" and \\ are its only escapes
_ONE = (
    "a comma outside quotes separates Idempotency-Key values (two headers, or one key holding a comma): "
    'send exactly one key, and put a key that holds a comma in double quotes ("...")'
)


def fingerprint(secret: str | bytes, method: str, endpoint: str, payload: Mapping[str, Any]) -> str:
    """A retry must be the same request: an HMAC of the method, the endpoint and the validated, normalised body,
    under a secret (a body may hold a card number, which must never be recoverable from what is stored)."""
    request = {"method": method.upper(), "endpoint": endpoint, "body": payload}
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()
