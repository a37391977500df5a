"""no-fingerprint: a changed body under a used key is not detected.

The shop's payment with one part swapped; its page's words: content/<language>/mistakes/no-fingerprint.md
"""

from __future__ import annotations

from typing import Any

from checkout.idempotency.edge import keyed_fingerprint
from checkout.lab.mistakes.twin import twin


def nothing_of_the_request(endpoint: str, body: dict[str, Any]) -> str:
    # THE MISTAKE: nothing about the request is kept with the key, so another body under it looks the same.
    return ""


PIPELINE = twin("no-fingerprint", fingerprint_of=nothing_of_the_request)
SWAPPED = "fingerprint_of"
REPLACES = ((keyed_fingerprint, nothing_of_the_request),)
