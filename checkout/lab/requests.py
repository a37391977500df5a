"""GET /api/lab/requests?key=K (lab only): the requests this shop received under key K, oldest first.

A test against a running shop learns how many submits reached it, and their answers, without a counter of its own.
Built from the audit trail, and from the lab's own rows of the POSTs refused under a key with no line in it.
Design: docs/design.md#checkoutlabrequestspy-the-requests-under-a-key
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, Response, current_app, has_request_context, jsonify, request, session

from checkout.audit import REQUEST_TAG, AuditEvent, IdempotencyEvent, request_tag
from checkout.database import writing
from checkout.errors import Problem
from checkout.extensions import db
from checkout.idempotency import Event, InvalidKey, parse_key
from checkout.lab import lab_only, seats
from checkout.lab.ledger import iso
from checkout.lab.tables import LabUntraced
from checkout.shop.identity import SESSION_CUSTOMER, api_customer
from checkout.shop.placement import BROWSER_ENDPOINT
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
    whose = seats.scope()  # a seat's browser: the seat's requests under that key alone
    events = db.session.scalars(
        sa.select(IdempotencyEvent)
        .where(IdempotencyEvent.key == key, IdempotencyEvent.customer == whose if whose else sa.true())
        .order_by(IdempotencyEvent.id)
    ).all()
    found: dict[str, dict[str, Any]] = {}
    for event in events:
        tag = event.detail.get(REQUEST_TAG)
        answered = found.get(str(tag)) if tag else None
        # A 202 with no "received" before it: a first phase refused the request as in progress, and the
        # events it noted rolled back with the phase; the 202 was noted after.
        if event.name == Event.RECEIVED or (answered is None and event.name == Event.ACCEPTED):
            if len(found) >= LIMIT:
                continue  # the oldest LIMIT requests are listed; their later steps are still read
            # Noted outside an HTTP request (a test playing a worker): a request of its own, status unknown.
            found[str(tag) if tag else f"event-{event.id}"] = {
                "endpoint": event.endpoint,
                "customer": event.customer,
                "received_at": event.created_at,
                "status": 202 if event.name == Event.ACCEPTED else None,
                "replayed": False,
            }
            continue
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
        elif event.name == Event.ACCEPTED:  # written after the conflict or the release it stands for
            answered["status"] = 202
        elif event.name in ANSWERED_UNFINISHED:
            answered["status"] = 500 if event.detail.get("reason") == "error" else 503
    untraced = db.session.scalars(
        sa.select(LabUntraced)
        .where(LabUntraced.key == key, LabUntraced.customer == whose if whose else sa.true())
        .order_by(LabUntraced.received_at, LabUntraced.id)
        .limit(LIMIT)
    ).all()
    listed = [*found.values()] + [
        {
            "endpoint": r.endpoint,
            "customer": r.customer,
            "received_at": r.received_at,
            "status": r.status,
            "replayed": False,
        }
        for r in untraced
    ]
    listed.sort(key=lambda r: r["received_at"])  # by the moment, not its text (isoformat drops zero microseconds)
    return [{**r, "received_at": iso(r["received_at"])} for r in listed[:LIMIT]]


# --- the requests the trail missed -----------------------------------------------------------------------

# Kept in the WSGI environ, which is the request's own (flask.g is the app context's, shared by a test's requests).
_TRACED = "checkout.lab.traced_keys"
_ENTRIES = frozenset({Event.RECEIVED, Event.ACCEPTED})


def remember_traced(events: Sequence[AuditEvent]) -> None:
    """An ``on_committed`` subscriber: the keys under which the trail lists the request being served (the events
    that make it an entry of ``requests_under``, with its tag)."""
    if has_request_context():
        tag = request_tag()
        listed = (e["key"] for e in events if e["name"] in _ENTRIES and e["detail"].get(REQUEST_TAG) == tag)
        request.environ.setdefault(_TRACED, set()).update(listed)


def _key_sent(api: bool) -> str | None:
    """The key a POST carried, where its endpoint reads it (the API's header, a page's hidden field)."""
    raw = (request.headers.get("Idempotency-Key") if api else request.form.get("idempotency_key")) or ""
    try:
        return parse_key(raw)
    except InvalidKey:  # refused for its key: kept under what was sent
        return raw.strip()[:255] or None


def _endpoint(rule: str) -> str:
    """As the engine names it: the route, but a mistake's twin is named in it (checkout/lab/mistakes/twin.py)."""
    name = (request.view_args or {}).get("name")
    return f"POST {rule.replace('<name>', name) if isinstance(name, str) else rule}"


@bp.after_app_request
def _note_untraced(response: Response) -> Response:
    """A POST refused under a key (4xx), with no line of its own in the trail (refused before the engine ran, or
    in a first phase that rolled back): the lab keeps it, so the key's list holds every request that reached the
    shop. Not a 429 (the throttle is there so that a refusal costs little), nor a 5xx (the database may be why)."""
    refused = 400 <= response.status_code < 500 and response.status_code != 429
    if request.method != "POST" or request.url_rule is None or not refused:
        return response
    try:
        api = request.path.startswith("/api/")
        key = _key_sent(api)
        if key is None or key in request.environ.get(_TRACED, ()):
            return response
        if api:
            customer = api_customer()
            customer_id = customer.public_id if customer else None
        else:
            customer_id = session.get(SESSION_CUSTOMER)
        with writing(durable=False):
            db.session.add(
                LabUntraced(
                    key=key,
                    endpoint=_endpoint(request.url_rule.rule),
                    customer=customer_id,
                    status=response.status_code,
                )  # received_at: now, as it is answered (a refusal takes no time to speak of)
            )
    except Exception as error:  # a lab note never changes the answer
        with contextlib.suppress(Exception):
            db.session.rollback()
        current_app.logger.warning("the lab could not note a refused request: %r", error)
    return response


@bp.get("/api/lab/requests")
def requests_json() -> Response:
    key = request.args.get("key", "")
    if not key:
        raise Problem(400, "Missing key", "Name the Idempotency-Key: /api/lab/requests?key=K.")
    return jsonify(requests_under(key))
