"""What an idempotency key may look like.

A key is 16 to 255 visible ASCII characters. Clients following the IETF
draft send it as a structured-field string, in double quotes; we accept that
form and unquote it.
"""

from __future__ import annotations

import re

_KEY = re.compile(r"[\x21-\x7e]{16,255}")


class InvalidKey(ValueError):
    """Base for key problems."""


class MissingKey(InvalidKey):
    pass


class MalformedKey(InvalidKey):
    pass


def parse_key(raw: str | None) -> str:
    """Return the key a client sent, or raise MissingKey / MalformedKey."""
    if raw is None or not raw.strip():
        raise MissingKey("an Idempotency-Key is required")
    value = raw.strip()
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        value = _unquote(value[1:-1])
    if not _KEY.fullmatch(value):
        raise MalformedKey("an Idempotency-Key is 16 to 255 visible ASCII characters")
    return value


def _unquote(inner: str) -> str:
    # sf-string escapes are \" and \\; anything else after a backslash is invalid.
    out: list[str] = []
    chars = iter(inner)
    for char in chars:
        if char == "\\":
            nxt = next(chars, "")
            if nxt not in ('"', "\\"):
                raise MalformedKey("invalid escape in a quoted Idempotency-Key")
            out.append(nxt)
        elif char == '"':
            raise MalformedKey("unescaped quote in a quoted Idempotency-Key")
        else:
            out.append(char)
    return "".join(out)
