"""Errors a user can act on: a clear page in the browser, RFC 9457 problem+json in the API (never a trace).

Every handler rolls the session back first, so nothing half-written stays.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, render_template, request
from flask.globals import request_ctx
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException, InternalServerError

from checkout import idempotency
from checkout.database import RETRY_AFTER_SECONDS
from checkout.extensions import db
from checkout.limits import retry_after_seconds

log = logging.getLogger(__name__)

# Problem types are short tokens (relative URI references), e.g. "idempotency-key-reused".
PROBLEM_TYPES = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    413: "payload-too-large",
    415: "unsupported-media-type",
    422: "validation-error",
    429: "too-many-requests",
    500: "internal-error",
    503: "service-unavailable",
}


def problem(
    status: int, title: str, detail: str, type_: str | None = None, headers: dict[str, str] | None = None, **extra: Any
) -> Response:
    """The engine's problem+json (one shape in the tree), its type defaulting to the status's."""
    return idempotency.problem(
        status, title, detail, type_ or PROBLEM_TYPES.get(status, "about:blank"), headers, **extra
    )


class Problem(Exception):
    """A request refused with a problem+json answer, stored nowhere. Raised wherever the refusal is known (the
    key, the body, a missing resource); one handler answers it, after rolling the session back."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        type_: str | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type_
        self.headers = headers
        self.extra = extra

    def response(self) -> Response:
        return problem(self.status, self.title, self.detail, self.type, self.headers, **self.extra)


TITLES = {
    400: _l("Bad request"),
    401: _l("Not signed in"),
    404: _l("Not found"),
    405: _l("Method not allowed"),
    413: _l("Too large"),
    415: _l("Unsupported media type"),
    429: _l("Too many requests"),
    500: _l("Something went wrong"),
    503: _l("Temporarily unavailable"),
}
MESSAGES = {
    400: _l("The request could not be read. Nothing was charged."),
    404: _l("There is nothing here, or it belongs to someone else."),
    405: _l("This address does not accept that kind of request."),
    413: _l("The request body is larger than 64 KiB."),
    429: _l("You sent too many requests in a short time. Wait a moment, then try again; nothing was charged twice."),
}


def _wants_problem() -> bool:
    return request.path.startswith("/api/") or request.path.startswith("/webhooks/")


def _rollback() -> None:
    try:
        db.session.rollback()
    except Exception:  # the database may be the thing that failed
        log.warning("rollback failed", exc_info=True)


def _render(status: int, title: str, message: str, headers: dict[str, str] | None = None) -> ResponseReturnValue:
    title, message = str(title), str(message)  # lazy translations, resolved in this request's language
    if _wants_problem():
        return problem(status, title, message, headers=headers)
    # A Host outside TRUSTED_HOSTS leaves Flask no URL adapter: a page without links, not a 500.
    template = "errors/error.html" if request_ctx.url_adapter is not None else "errors/bare.html"
    page = render_template(template, title=title, message=message)
    return Response(page, status=status, headers=headers or {}, mimetype="text/html")


def _what(error: Exception) -> str:
    """The error's class and PostgreSQL's code for it (55P03 a lock wait, 57014 a statement, 25P03 an idle
    session): never its message, which may carry what the statement was given."""
    sqlstate = getattr(getattr(error, "orig", None), "sqlstate", None)
    return f"{error.__class__.__name__} (SQLSTATE {sqlstate})" if sqlstate else error.__class__.__name__


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(Problem)
    def refused(error: Problem) -> Response:
        _rollback()
        return error.response()

    @app.errorhandler(CSRFError)
    def csrf_error(error: CSRFError) -> ResponseReturnValue:
        _rollback()
        return _render(400, _("This form has expired"), _("Reload the page and submit it again. Nothing was charged."))

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> ResponseReturnValue:
        _rollback()
        status = error.code or 500
        headers: dict[str, str] = {}
        if status == 405:
            # The methods the route does accept (werkzeug knows them; a custom answer must repeat them).
            headers["Allow"] = ", ".join(getattr(error, "valid_methods", None) or [])
        if status == 429:
            headers["Retry-After"] = str(retry_after_seconds())
        message = MESSAGES.get(status) or error.description or error.name
        return _render(status, TITLES.get(status, error.name), message, headers)

    @app.errorhandler(OperationalError)  # unreachable, or gave up waiting: a lock, a statement, a session ended
    @app.errorhandler(PoolTimeout)  # every connection of this worker's pool is busy
    def database_unavailable(error: OperationalError | PoolTimeout) -> ResponseReturnValue:
        _rollback()
        log.error("database unavailable: %s", _what(error))
        return _render(
            503,
            _("Temporarily unavailable"),
            _("We cannot reach our database right now. Nothing was charged twice; please try again in a moment."),
            {"Retry-After": str(RETRY_AFTER_SECONDS)},
        )

    @app.errorhandler(InternalServerError)
    def internal_error(error: InternalServerError) -> ResponseReturnValue:
        _rollback()
        return _render(
            500,
            "Something went wrong",
            "We could not finish your request. If you were paying, press Pay again: "
            "the same payment resumes and is never charged twice.",
        )
