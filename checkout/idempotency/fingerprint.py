"""The request fingerprint stored with a key.

A retry must be the same request. We compare an HMAC of the method, the
endpoint and the validated, normalized body, keyed by a secret of its own
(CHECKOUT_FINGERPRINT_SECRET, not SECRET_KEY): the body covers a card number,
which must never be recoverable from what we store.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any


def fingerprint(secret: str | bytes, method: str, endpoint: str, payload: Mapping[str, Any]) -> str:
    canonical = json.dumps(
        {"method": method.upper(), "endpoint": endpoint, "body": payload},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()
