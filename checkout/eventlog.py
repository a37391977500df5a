"""One JSON line per audit event, for log pipelines: what happened to which key, order and charge.

Written once the event's unit of work has committed (``on_committed``), so a
line is never about a change that was rolled back. A line carries the
customer, endpoint, key, order, charge, refund, whether it was a replay, and
the event's detail, never a card number: nothing the engine records holds one,
and a last scrub replaces any run of 13 to 19 digits anyway.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Sequence
from typing import Any

from checkout.idempotency import Event
from checkout.idempotency.audit import AuditEvent, on_committed

# Not a child of the app's logger ("checkout"): Flask's handler there would prefix every line.
log = logging.getLogger("checkout_audit")
_CARD_LIKE = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")


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
    return _CARD_LIKE.sub("[redacted]", json.dumps(record, ensure_ascii=False, default=str, sort_keys=False))


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
