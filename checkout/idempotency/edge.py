"""The HTTP edge: ``Idempotency``, the Flask extension, and ``respond``, the one way an endpoint runs under a key.

It reads ``Idempotency-Key`` and ``Prefer`` (RFC 7240), runs a pipeline's phases and answers each outcome as the IETF
draft "The Idempotency-Key HTTP Header Field" says: a replay, 409 and ``Retry-After`` in progress, 422 for another
request, 503 and ``Retry-After`` for an unknown outcome, 202 for a client that polls; or a page renders it instead.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from flask import Flask, Response, abort, current_app, make_response, request
from flask.typing import ResponseReturnValue
from sqlalchemy.exc import OperationalError

from .carry import Carriers
from .engine import Asked, Operation, Phase, peek, run, take_over
from .keys import InvalidKey, fingerprint, parse_key
from .models import record_table
from .outcomes import Done, InProgress, Mismatch, Outcome, Refused, Unfinished
from .signals import listening, note
from .store import NO_STORE, RecordStore, SqlStore
from .types import STARTED, Complete, Event, RecordView, Scope, Settings, Step, StoredResponse
from .units import WRITE_OPTION, configure_sqlite, writing

CONFIG = {
    "IDEMPOTENCY_LEASE_SECONDS": 30.0,  # how long a worker holds a key before a retry may take it over
    "IDEMPOTENCY_LIFETIME_SECONDS": 24 * 3600.0,  # how long a completed key is replayed before a purge may go
    "IDEMPOTENCY_WAITERS_PER_KEY": 2,  # duplicates of one key that wait in one process; the rest answer at once
    "IDEMPOTENCY_MAX_WAIT_SECONDS": 10,  # the cap on Prefer: wait=N
    "IDEMPOTENCY_CARRIERS": 8,  # operations answered 202 that a process carries on at once (0: none; carry.py)
    "IDEMPOTENCY_SECRET": None,  # the fingerprints' HMAC key (a body may hold a card number); else SECRET_KEY
}
View = TypeVar("View", bound=Callable[..., Any])


# --- a pipeline: one endpoint's rules ---------------------------------------------------------------------


def per_customer(customer: str, endpoint: str, key: str) -> Scope:
    """A key means something only for one customer on one endpoint."""
    return Scope(customer, endpoint, key)


def keyed_fingerprint(endpoint: str, body: Mapping[str, Any]) -> str:
    """An HMAC of the normalised body, stored with the key: a retry must be the same request."""
    config = current_app.config
    return fingerprint(config["IDEMPOTENCY_SECRET"] or config["SECRET_KEY"], "POST", endpoint, body)


@dataclass(frozen=True)
class Pipeline:
    """How one endpoint runs under a key: where its records live, what a key is scoped to, what a request's
    fingerprint covers. An app's own pipelines add their own parts (a provider, the key it is called with)."""

    endpoint: str
    store: RecordStore | None = None  # None: the extension's SQL store; NO_STORE: no idempotency at all
    scope_of: Callable[[str, str, str], Scope] = per_customer
    fingerprint_of: Callable[[str, Mapping[str, Any]], str] = keyed_fingerprint

    @property
    def keyed(self) -> bool:
        return self.store is not NO_STORE


# --- the extension ------------------------------------------------------------------------------------------


class Idempotency:
    """The Flask extension: ``Idempotency(app, db)``, or ``init_app(app, db)`` after ``db.init_app(app)``. Its record
    table joins ``db.metadata`` (the app's migrations carry it); SQLite gets ``BEGIN IMMEDIATE``."""

    def __init__(self, app: Flask | None = None, db: Any = None, *, table: str = "idempotency_records") -> None:
        self.table_name, self.db = table, db
        if db is not None:
            self._bind(db)
        if app is not None:
            self.init_app(app)

    def _bind(self, db: Any) -> None:
        self.db = db
        self.records = record_table(db.metadata, self.table_name)
        self.store = SqlStore(self.records)

    def init_app(self, app: Flask, db: Any = None) -> None:
        if db is not None:
            self._bind(db)
        if self.db is None:
            raise TypeError("Idempotency needs the app's Flask-SQLAlchemy: init_app(app, db)")
        for name, value in CONFIG.items():
            app.config.setdefault(name, value)
        app.extensions["idempotency"] = self
        app.extensions["idempotency.carriers"] = Carriers(app, int(app.config["IDEMPOTENCY_CARRIERS"]))
        with app.app_context():
            configure_sqlite(self.db.engine)

    def create_all(self, app: Flask) -> None:
        """``db.create_all()`` for an app without migrations, safe when several processes start at once: the first
        creates, the others wait for it (an advisory lock on PostgreSQL, BEGIN IMMEDIATE on SQLite)."""
        with app.app_context(), self.db.engine.connect() as connection:
            connection = connection.execution_options(**{WRITE_OPTION: True})
            with connection.begin():
                if connection.dialect.name == "postgresql":
                    connection.execute(sa.text("SELECT pg_advisory_xact_lock(4242424242)"))
                self.db.metadata.create_all(connection)

    def settings(self, expected_call_seconds: float | None = None) -> Settings:
        config = current_app.config
        lease, lifetime = float(config["IDEMPOTENCY_LEASE_SECONDS"]), float(config["IDEMPOTENCY_LIFETIME_SECONDS"])
        return Settings(lease, lifetime, int(config["IDEMPOTENCY_WAITERS_PER_KEY"]), 0.1, expected_call_seconds)

    def peek(self, pipeline: Pipeline, key: str, customer: str = "") -> RecordView | None:
        """The key's record under ``pipeline``'s rules, read without claiming anything."""
        return peek(pipeline.scope_of(customer, pipeline.endpoint, key), pipeline.store or self.store)

    def take_over(self, view: RecordView, by: Event = Event.RESUMED) -> Operation | None:
        """Hold an abandoned record of the extension's store (reconcile); None if someone else won."""
        return take_over(self.store, view, self.settings(), by=by)

    def respond(
        self,
        pipeline: Pipeline,
        phases: Mapping[str, Phase],
        *,
        body: Mapping[str, Any],
        key: str | None = None,
        customer: str = "",
        answers: Answers | None = None,
        wait: float | None = None,
        expected_call_seconds: float | None = None,
        resource: Resource | None = None,
        final: Final | None = None,
    ) -> Response:
        """Run ``phases`` at most once per key and answer the outcome (in JSON, unless ``answers`` renders a page).

        ``body``: the validated request its fingerprint covers. ``key``: the key if read already (else the header
        is read here). ``wait``: how long a duplicate waits (else as ``Prefer: wait`` asks). ``expected_call_seconds``:
        for a duplicate's ``Retry-After``. ``resource``: where it may be polled (``Prefer: respond-async``: 202).
        ``final``: a reference's answer if final: a key in progress for what another path finished (a webhook)
        answers that, never 409 or 202 for something already paid; the holder still stores its own.
        """
        if key is None:
            key = read_key() if pipeline.keyed else ""
        scope = pipeline.scope_of(customer, pipeline.endpoint, key)
        waits = preferred_wait() if wait is None else wait
        store, fingerprint_ = pipeline.store or self.store, pipeline.fingerprint_of(pipeline.endpoint, body)
        settled = (lambda reference: final(reference) is not None) if final else None  # a waiting duplicate wakes
        asked = Asked(store, scope, fingerprint_, phases, self.settings(expected_call_seconds), settled)
        outcome = run(asked, wait=waits)
        applied = [f"wait={waits}"] if wait is None and waits else []
        reference = outcome.reference if isinstance(outcome, InProgress | Unfinished) else None
        if final and reference and (finished := final(reference)) is not None:
            outcome = Done(finished, replayed=True)
            _note_answer(scope, Event.REPLAYED, status=finished.status, final=True)
        response = None
        if resource is not None and prefers_async() and (pending := _still_at_work(outcome)) is not None:
            carriers: Carriers = current_app.extensions["idempotency.carriers"]
            own = isinstance(outcome, InProgress | Unfinished)  # this key's operation: 202 only if carried on here
            response = _accepted(resource, *pending) if not own or carriers.start(asked, pending[1]) else None
            if response is not None:
                applied.insert(0, "respond-async")
                _note_answer(scope, Event.ACCEPTED)
        if response is None:
            response = make_response((answers or JSON).answer(outcome, key))
        if applied:
            response.headers["Preference-Applied"] = ", ".join(applied)
        return response


def idempotent(endpoint: str | None = None, *, customer: Callable[[], str] = str) -> Callable[[View], View]:
    """For a view whose whole work is one transaction (the Powertools use): it runs inside the claim's unit of
    work, and what it returns is stored under the key and replayed. The fingerprint covers the body as sent."""

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def keyed(*args: Any, **kwargs: Any) -> Response:
            once: Idempotency = current_app.extensions["idempotency"]
            rule = request.url_rule.rule if request.url_rule is not None else request.path

            def commit(_operation: Any, _nothing: None) -> Step:
                return Complete(stored(make_response(view(*args, **kwargs))))

            sent = {"json": request.get_json(silent=True)} if request.is_json else {"data": request.get_data(True)}
            pipeline = Pipeline(endpoint or f"{request.method} {rule}")
            return once.respond(pipeline, {STARTED: Phase(commit)}, body=sent, customer=customer())

        return keyed  # type: ignore[return-value]

    return decorate


# --- reading the request ------------------------------------------------------------------------------------

_PREFER_WAIT = re.compile(r"(?:^|[,;\s])wait\s*=\s*(\d{1,6})(?:$|[,;\s])", re.IGNORECASE)


def read_key(raw: str | None = None) -> str:
    """The request's key (the ``Idempotency-Key`` header unless ``raw`` is given); else a 400 problem, at once."""
    try:
        return parse_key(request.headers.get("Idempotency-Key") if raw is None else raw)
    except InvalidKey as error:  # answered past every error handler: nothing was done yet
        abort(problem(400, "Invalid Idempotency-Key", str(error), "invalid-idempotency-key"))


def preferred_wait() -> int:
    """``Prefer: wait=N``: how long the client will wait for an operation in progress, capped."""
    found = _PREFER_WAIT.search(request.headers.get("Prefer", ""))
    return min(int(found.group(1)), int(current_app.config["IDEMPOTENCY_MAX_WAIT_SECONDS"])) if found else 0


def prefers_async() -> bool:
    """``Prefer: respond-async``: the client would rather poll than wait or be told 409 or 503."""
    preferences = request.headers.get("Prefer", "").replace(";", ",").split(",")
    return any(token.strip().lower() == "respond-async" for token in preferences)


# --- answering ----------------------------------------------------------------------------------------------

Resource = Callable[[str], tuple[str, bytes] | None]  # a reference -> its URL and its JSON now (None: not there)
Final = Callable[[str], StoredResponse | None]  # a reference -> its final answer (None: not final, or not there)


def _still_at_work(outcome: Outcome) -> tuple[str, int] | None:
    """What is still being made, and when to look again: this key's operation (409 in progress, 503 unknown), or
    what a first phase refused this request for as in progress."""
    if isinstance(outcome, InProgress | Unfinished) and outcome.reference:
        return outcome.reference, outcome.retry_after
    if isinstance(outcome, Refused) and outcome.reference and outcome.response.status == 409:
        return outcome.reference, int(outcome.response.headers.get("Retry-After", 1))
    return None


def _accepted(resource: Resource, reference: str, retry_after: int) -> Response | None:
    if (found := resource(reference)) is None:
        return None
    return Response(found[1], 202, {"Location": found[0], "Retry-After": str(retry_after)}, "application/json")


def _note_answer(scope: Scope, event: Event, **detail: Any) -> None:
    """The trail says what the edge told this request (202, another path's final answer); never changes it."""
    try:
        if listening():
            with writing(durable=False):
                note(scope, event, **detail)
    except OperationalError as error:
        current_app.logger.warning("%s of %s went unnoted: %s", event, scope.endpoint, str(error).splitlines()[0])


def json_bytes(payload: Any) -> bytes:
    """The exact bytes sent, and stored for replay."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def problem(
    status: int, title: str, detail: str, type_: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> Response:
    """An RFC 9457 problem+json answer (fields that are None are left out)."""
    body = {"type": type_, "title": title, "status": status, "detail": detail}
    body.update({name: value for name, value in extra.items() if value is not None})
    response = Response(json_bytes(body), status=status, mimetype="application/problem+json")
    response.headers.update(headers or {})
    return response


def stored(response: Response) -> StoredResponse:
    """What an answer stores to be replayed: its status, the headers that matter, its exact bytes."""
    kept = {name: value for name, value in response.headers.items() if name.lower() not in _NOT_KEPT}
    return StoredResponse(response.status_code, kept, response.get_data())


_NOT_KEPT = frozenset({"content-length", "set-cookie", "date", "vary"})


def answered(response: StoredResponse) -> Response:  # a stored answer, sent again byte for byte
    return Response(response.body, status=response.status, headers=response.headers)


def key_reused() -> StoredResponse:
    detail = "This Idempotency-Key was used with a different request; use a new key."
    return stored(problem(422, "Idempotency-Key reused", detail, "idempotency-key-reused"))


class Answers(Protocol):  # JSON by default; a browser's pages in place of it
    def answer(self, outcome: Outcome, key: str) -> ResponseReturnValue: ...


@dataclass(frozen=True)
class JsonAnswers:
    """problem+json for every outcome but a stored answer, which is replayed byte for byte. ``made`` names what
    the operation makes in a 409's or 503's body (``order_id``); ``about``, what the request is for."""

    made: str = "reference"
    about: Mapping[str, str | None] = field(default_factory=dict)

    def answer(self, outcome: Outcome, key: str) -> Response:
        match outcome:
            case Done(response=response, replayed=replayed):
                answer = answered(response)
                answer.headers.update({"Idempotent-Replayed": "true"} if replayed else {})
                return answer
            case Refused(response=response):
                return answered(response)
            case Mismatch():
                return answered(key_reused())
            case InProgress(reference=reference, retry_after=retry_after):
                detail = "A request with this Idempotency-Key is still being processed; retry later."
                headers = {"Retry-After": str(retry_after)}
                names = {"idempotency_key": key, **self.about, self.made: reference}
                return problem(409, "Request in progress", detail, "idempotency-request-in-progress", headers, **names)
            case Unfinished():
                return self.unfinished(outcome, key)
        raise TypeError(f"unknown outcome {outcome!r}")

    def unfinished(self, outcome: Unfinished, key: str) -> Response:
        detail = f"{outcome.reason}. Retry with the same Idempotency-Key: it resumes where this attempt stopped."
        headers = {"Retry-After": str(outcome.retry_after)}
        names = {"idempotency_key": key or None, **self.about, self.made: outcome.reference}
        return problem(503, "Outcome not confirmed yet", detail, "outcome-unconfirmed", headers, **names)


JSON = JsonAnswers()
