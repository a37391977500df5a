"""GET /api/lab/requests?key=K (lab only): the requests this shop received under key K, oldest first.

A test against a running shop learns how many submits reached it, and their answers, without a counter of its own.
Built from the audit trail, and from the lab's own rows of the requests it missed (refused before the engine ran).
Design: docs/design.md#checkoutlabrequestspy-the-requests-under-a-key
"""

from __future__ import annotations

import heapq
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, Response, current_app, jsonify, request, session
from sqlalchemy.exc import SQLAlchemyError

from checkout.database import TransactionError, writing
from checkout.errors import Problem
from checkout.extensions import db
from checkout.idempotency import parse_key
from checkout.idempotency.audit import REQUEST_TAG, request_noted
from checkout.idempotency.keys import InvalidKey
from checkout.idempotency.models import IdempotencyEvent
from checkout.idempotency.types import Event
from checkout.lab import lab_only
from checkout.lab.ledger import iso
from checkout.lab.tables import LabUntraced
from checkout.shop.identity import SESSION_CUSTOMER, api_customer
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
    refused = db.session.scalars(
        sa.select(LabUntraced).where(LabUntraced.key == key).order_by(LabUntraced.id).limit(LIMIT)
    ).all()
    listed = (
        {"endpoint": r.endpoint, "customer": r.customer, "received_at": iso(r.received_at), "status": r.status}
        | {"replayed": False}
        for r in refused
    )
    return list(heapq.merge(found.values(), listed, key=lambda r: r["received_at"]))[:LIMIT]


def _key_sent() -> str | None:
    """The key a POST carried (the API's header, a form's hidden field), as the engine would have read it."""
    raw = request.headers.get("Idempotency-Key") or request.form.get("idempotency_key") or ""
    try:
        return parse_key(raw)
    except InvalidKey:  # refused for its key: kept under what was sent
        return raw.strip()[:255] or None


@bp.after_app_request
def _note_untraced(response: Response) -> Response:
    """A POST under a key that the trail never heard of (answered before the engine ran, or by a twin that
    ignores keys): the lab keeps it, so the key's list holds every request that reached the shop."""
    if request.method != "POST" or request.url_rule is None or request_noted() or not (key := _key_sent()):
        return response
    try:
        customer = api_customer() if request.headers.get("Authorization") else None
        with writing(durable=False):
            db.session.add(
                LabUntraced(
                    key=key,
                    endpoint=f"POST {request.url_rule.rule}",
                    customer=customer.public_id if customer else session.get(SESSION_CUSTOMER),
                    status=response.status_code,
                )
            )
    except (SQLAlchemyError, TransactionError) as error:  # a lab note never changes the answer
        db.session.rollback()
        current_app.logger.warning("the lab could not note a request the trail missed: %s", str(error).splitlines()[0])
    return response


@bp.get("/api/lab/requests")
def requests_json() -> Response:
    key = request.args.get("key", "")
    if not key:
        raise Problem(400, "Missing key", "Name the Idempotency-Key: /api/lab/requests?key=K.")
    return jsonify(requests_under(key))
