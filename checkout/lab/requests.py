"""GET /api/lab/requests?key=K (lab only): the requests this shop received under key K, oldest first.

A test against a running shop learns how many submits reached it, and their answers, without a counter of its own.
Built from the audit trail alone: a request refused before its key was claimed left no trace and is not listed.
Design: docs/design.md#checkoutlabrequestspy-the-requests-under-a-key
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import Blueprint, Response, jsonify, request

from checkout.errors import Problem
from checkout.extensions import db
from checkout.idempotency.audit import REQUEST_TAG
from checkout.idempotency.models import IdempotencyEvent
from checkout.idempotency.types import Event
from checkout.lab import lab_only
from checkout.lab.ledger import iso
from checkout.shop.placement import BROWSER_ENDPOINT, PaymentEvent
from checkout.shop.refunds import BROWSER_REFUNDS

bp = lab_only(Blueprint("lab_requests", __name__))

LIMIT = 1000  # requests listed at most for one key: the oldest ones

# What a request whose key was in progress was answered: 409 on the API; the browser's pages differ.
IN_PROGRESS_STATUS = {BROWSER_ENDPOINT: 202, BROWSER_REFUNDS: 303}
ANSWERED_IN_PROGRESS = (Event.CONFLICT, Event.LEASE_LOST)
# What a request that could not learn its outcome notes as it lets go of the key (the shop's own fault
# events, then "released" unless a retry had taken the key over meanwhile): it was answered 503.
ANSWERED_UNFINISHED = ("gateway_unavailable", "answer_lost", Event.RELEASED)


def requests_under(key: str) -> list[dict[str, Any]]:
    """The requests received under ``key``, oldest first, each with the status it was answered."""
    events = db.session.scalars(
        sa.select(IdempotencyEvent).where(IdempotencyEvent.key == key).order_by(IdempotencyEvent.id)
    ).all()
    found: dict[str, dict[str, Any]] = {}
    for event in events:
        tag = event.detail.get(REQUEST_TAG)
        if event.name == Event.RECEIVED:
            if len(found) >= LIMIT:
                break
            # Noted outside an HTTP request (a test playing a worker): a request of its own, status unknown.
            found[str(tag) if tag else f"event-{event.id}"] = {
                "endpoint": event.endpoint,
                "customer": event.customer,
                "received_at": iso(event.created_at),
                "status": None,
                "replayed": False,
            }
            continue
        answered = found.get(str(tag)) if tag else None
        if answered is None:
            continue  # a step no listed request took (reconcile, the gateway's webhook, the lab's buttons)
        if event.name == Event.REPLAYED:
            answered.update(status=event.detail.get("status"), replayed=True)
        elif event.name == Event.COMPLETED:
            answered["status"] = event.detail.get("status")
        elif event.name == Event.MISMATCH:
            answered["status"] = 422
        elif event.name in ANSWERED_IN_PROGRESS:
            answered["status"] = IN_PROGRESS_STATUS.get(event.endpoint, 409)
        elif event.name == PaymentEvent.ACCEPTED:  # written after the conflict or the release it stands for
            answered["status"] = 202
        elif event.name in ANSWERED_UNFINISHED:
            answered["status"] = 500 if event.detail.get("reason") == "error" else 503
    return list(found.values())


@bp.get("/api/lab/requests")
def requests_json() -> Response:
    key = request.args.get("key", "")
    if not key:
        raise Problem(400, "Missing key", "Name the Idempotency-Key: /api/lab/requests?key=K.")
    return jsonify(requests_under(key))
