"""What every request and response goes through: the body, read whole and bounded, and the security headers.

The body is read whole first (too large 413, malformed 400): Werkzeug would let an oversized chunked body be
processed half-read. A NUL in the path is 404, in a query parameter or form field 400: PostgreSQL cannot hold one.
Design: docs/design.md#checkoutsecuritypy-the-body-nul-characters-the-headers
"""

from __future__ import annotations

import io
from typing import Any

from flask import Flask, Response, abort, request
from werkzeug.datastructures import MultiDict

from checkout.config import settings

BODY_PROBLEM = "checkout.body_problem"
FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})

STRICT_TRANSPORT_SECURITY = "max-age=31536000; includeSubDomains"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)


class BoundedBody:
    """WSGI middleware: read the request body whole, up to ``limit`` bytes, before the app runs."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        length_header = environ.get("CONTENT_LENGTH") or ""
        if not chunked and not length_header:
            return self.app(environ, start_response)
        if not chunked:
            try:
                length = int(length_header)
            except ValueError:
                length = -1
            if length < 0:
                environ[BODY_PROBLEM] = 400
            elif length > self.limit:
                environ[BODY_PROBLEM] = 413
                environ["wsgi.input"] = io.BytesIO()
                environ["CONTENT_LENGTH"] = "0"
            return self.app(environ, start_response)
        try:
            body = self._read(environ["wsgi.input"])
        except Exception:  # the server's own parser of chunks failed: a malformed body
            environ[BODY_PROBLEM] = 400
            body = b""
        if len(body) > self.limit:
            environ[BODY_PROBLEM] = 413
            body = b""
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        environ.pop("wsgi.input_terminated", None)
        return self.app(environ, start_response)

    def _read(self, stream: Any) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while size <= self.limit:
            chunk = stream.read(min(65536, self.limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)


class LowerCaseHost:
    """WSGI middleware: host names are case-insensitive (RFC 9110, 4.2.3), and Werkzeug's trusted-host check is
    not: ``Host: SHOP.EXAMPLE`` would get 400 from a shop that trusts shop.example."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if "HTTP_HOST" in environ:
            environ["HTTP_HOST"] = environ["HTTP_HOST"].lower()
        return self.app(environ, start_response)


def _holds_nul(fields: MultiDict[str, str]) -> bool:
    return any("\x00" in name or "\x00" in value for name, value in fields.items(multi=True))


def refuse_nul_characters() -> None:
    """404 for a NUL in the path, 400 in a query parameter or a form field (see the module's docstring)."""
    if "\x00" in request.path:
        abort(404)
    if _holds_nul(request.args) or (request.mimetype in FORM_TYPES and _holds_nul(request.form)):
        abort(400)


def register_security(app: Flask) -> None:
    production = settings(app).env == "production"
    # Wrapping wsgi_app is Flask's documented way to add middleware; mypy sees it as a method being replaced.
    app.wsgi_app = BoundedBody(app.wsgi_app, int(app.config["MAX_CONTENT_LENGTH"]))  # type: ignore[method-assign]
    app.wsgi_app = LowerCaseHost(app.wsgi_app)  # type: ignore[method-assign]

    @app.before_request
    def _refuse_unreadable_bodies() -> None:
        if problem := request.environ.get(BODY_PROBLEM):
            abort(problem)
        refuse_nul_characters()

    @app.after_request
    def _security_headers(response: Response) -> Response:
        headers = response.headers
        headers["X-Content-Type-Options"] = "nosniff"
        headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        headers["Referrer-Policy"] = "same-origin"
        headers["X-Frame-Options"] = "DENY"
        if request.endpoint != "static":
            headers["Cache-Control"] = "no-store"
        # Behind a proxy that ends TLS, a request is secure only if gunicorn trusts its
        # X-Forwarded-Proto (forwarded_allow_ips: 127.0.0.1 by default; name a remote proxy there).
        if production and request.is_secure:
            headers["Strict-Transport-Security"] = STRICT_TRANSPORT_SECURITY
        return response
