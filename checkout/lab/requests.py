"""GET /api/lab/requests?key=K (lab only): the requests this shop received under key K, oldest first.

A test against a running shop learns how many submits reached it, and their answers, without a counter of its own.
A plain log: one row per POST under a key, written as it arrives and given the status its client got as it is
answered (``replayed`` is the engine's word: its ``replayed`` note). Only a POST the shop can name a customer for is
kept (a valid token, a browser session the shop gave a customer): an unknown token, or a POST with no session, makes
the lab write nothing. With the lab on, that is two small units of work per such POST (the shop's own tests of its
transaction counts run with the lab off). A purge of a key's record (``flask idempotency purge``, the lab's "purge
every key") takes its requests out of the log with it.
Design: docs/design.md#checkoutlabrequestspy-the-requests-under-a-key
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, Flask, Response, current_app, has_request_context, jsonify, request, session

from checkout.database import writing
from checkout.errors import Problem
from checkout.extensions import db
from checkout.idempotency import Event, InvalidKey, Scope, parse_key
from checkout.idempotency.signals import noted, purged
from checkout.lab import lab_only, seats
from checkout.lab.ledger import iso
from checkout.lab.tables import LabRequest
from checkout.shop.identity import SESSION_CUSTOMER, api_customer

bp = lab_only(Blueprint("lab_requests", __name__))

LIMIT = 1000  # requests listed at most for one key: the oldest ones
# Kept in the WSGI environ, which is the request's own (flask.g is the app context's, shared by a test's requests).
_LOGGED, _REPLAYED = "checkout.lab.logged", "checkout.lab.replayed"
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def requests_under(key: str) -> list[dict[str, Any]]:
    """The requests received under ``key``, oldest first, each with the status it was answered."""
    whose = seats.scope()  # a seat's browser: the seat's requests under that key alone
    rows = db.session.scalars(
        sa.select(LabRequest)
        .where(LabRequest.key == key, LabRequest.customer == whose if whose else sa.true())
        .order_by(LabRequest.received_at, LabRequest.id)
        .limit(LIMIT)
    ).all()
    return [
        {
            "endpoint": row.endpoint,
            "customer": row.customer,
            "received_at": iso(row.received_at),
            "status": row.status,
            "replayed": row.replayed,
        }
        for row in rows
    ]


def listen(app: Flask) -> None:
    """Which requests the engine answered from a stored answer (its ``replayed`` note, in the request's environ), and
    which keys' records it purged (their requests go with them, so the log does not outgrow the records)."""
    noted.connect(_noted, sender=app)
    purged.connect(_purged, sender=app)


def _noted(_app: Flask, *, name: str, **_: Any) -> None:
    if name == Event.REPLAYED and has_request_context():
        request.environ[_REPLAYED] = True


def _purged(_app: Flask, *, scopes: Sequence[Scope]) -> None:
    """In the purge's own unit of work: the records and their requests go together."""
    whose = sa.tuple_(LabRequest.customer, LabRequest.endpoint, LabRequest.key)
    db.session.execute(sa.delete(LabRequest).where(whose.in_([(s.customer, s.endpoint, s.key) for s in scopes])))


def _key_sent(api: bool) -> str | None:
    """The key a POST carried, where its endpoint reads it (the API's header, a page's hidden field)."""
    if api:
        raw = request.headers.get("Idempotency-Key") or ""
    elif request.mimetype in _FORMS:  # never parse another body: a view may read it raw (the webhooks)
        raw = request.form.get("idempotency_key") or ""
    else:
        return None
    try:
        return parse_key(raw)
    except InvalidKey:  # refused for its key: kept under what was sent
        return raw.strip()[:255] or None


def _endpoint(rule: str) -> str:
    """As the engine names it: the route, but a mistake's twin is named in it (checkout/lab/mistakes/twin.py)."""
    name = (request.view_args or {}).get("name")
    return f"POST {rule.replace('<name>', name) if isinstance(name, str) else rule}"


def _customer(api: bool) -> str | None:
    if api:
        customer = api_customer()
        return customer.public_id if customer else None
    found = session.get(SESSION_CUSTOMER)
    return str(found) if found else None


@bp.before_app_request
def _received() -> None:
    """Logged as it arrives, its status still unknown: a test sees a request at the shop while it pays."""
    if request.method == "POST" and request.url_rule is not None:
        _log(None)


@bp.after_app_request
def _answered(response: Response) -> Response:
    """Its status, once answered; a request refused before ``_received`` ran (a failed CSRF check) is logged now.
    Not a 429: the throttle, which runs first, is there so that a refusal costs little."""
    if request.method == "POST" and request.url_rule is not None and response.status_code != 429:
        _log(response.status_code)
    return response


def _log(status: int | None) -> None:
    try:
        logged, replayed = request.environ.get(_LOGGED), bool(request.environ.get(_REPLAYED))
        if logged is not None:
            with writing(durable=False):  # a unit of its own on the request's session: no second connection to wait for
                db.session.execute(
                    sa.update(LabRequest).where(LabRequest.id == logged).values(status=status, replayed=replayed)
                )
            return
        api = request.path.startswith("/api/")
        key = _key_sent(api)
        customer = _customer(api) if key else None
        if key is None or customer is None or request.url_rule is None:
            return
        endpoint = _endpoint(request.url_rule.rule)
        row = {"key": key, "endpoint": endpoint, "customer": customer, "status": status, "replayed": replayed}
        with writing(durable=False):
            logged = db.session.scalar(sa.insert(LabRequest).values(row).returning(LabRequest.id))
        request.environ[_LOGGED] = logged  # once committed: a rolled-back row's id names nothing
    except Exception as error:  # a lab note never changes the answer
        with contextlib.suppress(Exception):
            db.session.rollback()
        current_app.logger.warning("the lab could not note a request: %r", error)


@bp.get("/api/lab/requests")
def requests_json() -> Response:
    key = request.args.get("key", "")
    if not key:
        raise Problem(400, "Missing key", "Name the Idempotency-Key: /api/lab/requests?key=K.")
    return jsonify(requests_under(key))
