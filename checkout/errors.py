"""Errors a user can act on: a clear page in the browser, problem+json in the API.

Every handler rolls the session back first, so nothing half-written stays.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, render_template, request
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException, InternalServerError

from checkout.extensions import db
from checkout.problems import problem

log = logging.getLogger(__name__)

TITLES = {
    400: "Bad request",
    401: "Not signed in",
    404: "Not found",
    405: "Method not allowed",
    413: "Too large",
    415: "Unsupported media type",
    500: "Something went wrong",
    503: "Temporarily unavailable",
}


def _wants_problem() -> bool:
    return request.path.startswith("/api/")


def _rollback() -> None:
    try:
        db.session.rollback()
    except Exception:  # the database may be the thing that failed
        log.warning("rollback failed", exc_info=True)


Answer = Response | tuple[str, int, dict[str, str]]


def _render(status: int, title: str, message: str, headers: dict[str, str] | None = None) -> Answer:
    if _wants_problem():
        return problem(status, title, message, headers=headers)
    return render_template("errors/error.html", title=title, message=message), status, headers or {}


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(CSRFError)
    def csrf_error(error: CSRFError) -> Answer:
        _rollback()
        return _render(400, "This form has expired", "Reload the page and submit it again. Nothing was charged.")

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Answer:
        _rollback()
        status = error.code or 500
        if status == 413:
            return _render(413, "Too large", "The request body is larger than 64 KiB.")
        if status == 404:
            return _render(404, "Not found", "There is nothing here, or it belongs to someone else.")
        return _render(status, TITLES.get(status, error.name), error.description or error.name)

    @app.errorhandler(OperationalError)
    def database_unavailable(error: OperationalError) -> Answer:
        _rollback()
        log.error("database unavailable: %s", error.__class__.__name__)
        return _render(
            503,
            "Temporarily unavailable",
            "We cannot reach our database right now. Nothing was charged twice; please try again in a moment.",
            {"Retry-After": "5"},
        )

    @app.errorhandler(InternalServerError)
    def internal_error(error: InternalServerError) -> Answer:
        _rollback()
        return _render(
            500,
            "Something went wrong",
            "We could not finish your request. If you were paying, press Pay again: "
            "the same payment resumes and is never charged twice.",
        )
