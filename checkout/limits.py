"""Per-client rate limits (Flask-Limiter): one client cannot starve everyone else.

A client is its API token when it sends one, else its address. Counters live
in Redis when ``CHECKOUT_REDIS_URL`` is set (shared by every worker and
server), else in each worker's memory (each worker then counts on its own); while Redis does not
answer, each worker counts in its memory too, and no request fails for it.
Over the limit: 429, problem+json for the API and a page for browsers, with
``Retry-After`` (see checkout.errors). ``CHECKOUT_RATE_LIMIT=off`` turns
limits off.
"""

from __future__ import annotations

import hashlib
import math
import time

from flask import Flask, current_app, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address


def client_key() -> str:
    """Whom a request counts against: a hash of its bearer token, else its address."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return "token:" + hashlib.sha256(token.strip().encode()).hexdigest()[:16]
    return "address:" + (get_remote_address() or "unknown")


def retry_after_seconds() -> int:
    """Seconds until the limit that was hit lets the client in again."""
    limiter: Limiter = current_app.extensions["checkout.limiter"]
    current = limiter.current_limit
    if current is None:
        return 1
    return max(1, math.ceil(current.reset_at - time.time()))


def register_rate_limits(app: Flask) -> None:
    setting = str(app.config["CHECKOUT_RATE_LIMIT"]).strip()
    enabled = setting.lower() not in ("off", "false", "0", "")
    redis_url = str(app.config["CHECKOUT_REDIS_URL"])
    limiter = Limiter(
        key_func=client_key,
        application_limits=[setting] if enabled else [],  # one budget per client, across every route
        storage_uri=redis_url or "memory://",
        strategy="fixed-window",
        headers_enabled=False,  # it would rewrite every Retry-After (409, 503) to the window's reset
        key_prefix="checkout",
        enabled=enabled,
        # Redis down: count in each worker's memory until it answers again, never fail the request.
        in_memory_fallback_enabled=bool(redis_url),
        swallow_errors=True,
    )
    # Static files, and the gateway's signed webhooks (it retries on its own schedule), count against nobody.
    limiter.request_filter(lambda: request.endpoint in ("static", "webhooks.receive"))
    limiter.init_app(app)
    app.extensions["checkout.limiter"] = limiter
