"""One JSON line per audit event, for log pipelines: what happened to which key, order and charge.

Written once the event's unit of work has committed (``on_committed``), so a
line is never about a change that was rolled back. A line carries the
customer, endpoint, key, order, charge, refund, whether it was a replay, and
the event's detail, never a card number: nothing the engine records holds one,
and a last scrub (``scrub``) replaces anything that can be one anyway.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Sequence
from typing import Any

from checkout.idempotency.audit import AuditEvent, on_committed
from checkout.idempotency.types import Event

# Not a child of the app's logger ("checkout"): Flask's handler there would prefix every line.
log = logging.getLogger("checkout_audit")
# What can be a card number: a run of 13 or more digits, written whole or in groups joined by one
# space or dash, that stands on its own. A run glued to a letter or an underscore is part of a longer
# token (the hex of a UUID-like key, "c85824c2-1234-5678-9012-af5cb7d7af16"; an id, "ord_<hex>").
# Luhn is not asked for, and runs longer than 19 digits are redacted too: a mistyped card number
# is still a card number but for one digit, and a false match costs only a log line's readability.
_CARD_LIKE = re.compile(r"(?<!\w)(?<!\d[ -])\d(?:[ -]?\d){12,}(?!\w)(?![ -]\d)")
REDACTED = "[redacted]"


def line_of(event: AuditEvent) -> str:
    detail: dict[str, Any] = dict(event["detail"])
    record = {
        "at": event["created_at"].isoformat().replace("+00:00", "Z"),
        "event": event["name"],
        "customer": event["customer"],
        "endpoint": event["endpoint"],
        "key": event["key"],
        "order": detail.get("order_id"),
        "charge": detail.get("charge_id"),
        "refund": detail.get("refund_id"),
        "replay": event["name"] == Event.REPLAYED,
        "worker": event["worker"],
        "detail": detail,
    }
    return json.dumps(scrub(record), ensure_ascii=False, default=lambda value: scrub(str(value)), sort_keys=False)


def scrub(value: Any) -> Any:
    """``value`` with anything that can be a card number redacted, in every string, key and number.

    Each value is scrubbed before it is written as JSON, not the JSON text after: an escape
    (``\\n4242...``) would glue a number to a letter there, and a redacted number would break the JSON.
    """
    if isinstance(value, str):
        return _CARD_LIKE.sub(REDACTED, value)
    if isinstance(value, dict):
        return {scrub(key): scrub(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool) and _CARD_LIKE.search(str(value)):
        return _CARD_LIKE.sub(REDACTED, str(value))
    return value


def log_committed(events: Sequence[AuditEvent]) -> None:
    if log.isEnabledFor(logging.INFO):
        for event in events:
            log.info(line_of(event))


def register_event_log() -> None:
    """Lines go to stderr (gunicorn and ``flask run`` show them) unless logging was set up otherwise."""
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    on_committed(log_committed)
