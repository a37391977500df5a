"""RFC 9457 problem details: every API error, never an HTML page or a trace."""

from __future__ import annotations

import json
from typing import Any

from flask import Response

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
    body: dict[str, Any] = {
        "type": type_ or PROBLEM_TYPES.get(status, "about:blank"),
        "title": title,
        "status": status,
        "detail": detail,
        **{name: value for name, value in extra.items() if value is not None},
    }
    response = Response(json_bytes(body), status=status, mimetype="application/problem+json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def json_bytes(payload: Any) -> bytes:
    """The exact bytes we send, and store for replay."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
