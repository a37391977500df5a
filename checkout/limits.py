"""Per-client rate limits (Flask-Limiter): one client cannot starve everyone else.

A client is the customer whose API token it sends, else its address, so made-up tokens buy no budget of their own.
Counters live in Redis when ``CHECKOUT_REDIS_URL`` is set, else (and while Redis does not answer) in worker memory.
Design: docs/design.md#checkoutlimitspy-per-client-rate-limits
"""

from __future__ import annotations

import math
import time

from flask import Flask, current_app
from flask_limiter import Limiter

from checkout.shop.identity import client_key, counts_against_nobody


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
    limiter.request_filter(counts_against_nobody)
    limiter.init_app(app)
    app.extensions["checkout.limiter"] = limiter
