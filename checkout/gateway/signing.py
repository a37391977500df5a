"""How the gateway signs a webhook, and how a receiver checks it (the provider's SDK, in miniature).

Header: ``Gateway-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">``. The
timestamp is inside what is signed, so an old delivery cannot be replayed with a fresh one.
"""

from __future__ import annotations

import hashlib
import hmac
import re

HEADER = "Gateway-Signature"
TOLERANCE_SECONDS = 300
# Unix seconds: ten digits until the year 2286. A longer "number" is refused before it is converted
# (Python will not read more than 4,300 digits, and nothing that long is "now" anyway).
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_DIGEST = re.compile(r"[0-9a-f]{64}")  # what hexdigest() writes: compare_digest needs ASCII on both sides


def sign(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(secret: str, header: str | None, body: bytes, now: int) -> str | None:
    """Why this signature must be refused, or None if it is good."""
    if not header:
        return f"no {HEADER} header"
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    timestamp, given = fields.get("t", ""), fields.get("v1", "")
    if not _TIMESTAMP.fullmatch(timestamp) or not _DIGEST.fullmatch(given):
        return f"a malformed {HEADER} header"
    if abs(now - int(timestamp)) > TOLERANCE_SECONDS:
        return f"a signature more than {TOLERANCE_SECONDS} s away from now"
    expected = sign(secret, int(timestamp), body).split("v1=", 1)[1]
    if not hmac.compare_digest(expected, given):
        return "a signature that does not match the body"
    return None
