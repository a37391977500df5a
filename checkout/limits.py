"""Per-client rate limits (Flask-Limiter): one client cannot starve everyone else.

A client is the customer whose API token it sends, else its address, so made-up tokens buy no budget of their own.
Counters live in Redis when ``CHECKOUT_REDIS_URL`` is set, else (and while Redis does not answer) in worker memory.
Design: docs/design.md#checkoutlimitspy-per-client-rate-limits
"""

from __future__ import annotations

import math
import threading
import time

from flask import Flask, current_app
from flask_limiter import Limiter
from limits.storage import MemoryStorage

from checkout.config import settings
from checkout.shop.identity import client_key, counts_against_nobody


def retry_after_seconds() -> int:
    """Seconds until the limit that was hit lets the client in again."""
    limiter: Limiter = current_app.extensions["checkout.limiter"]
    current = limiter.current_limit
    if current is None:
        return 1
    return max(1, math.ceil(current.reset_at - time.time()))


class SweptMemoryStorage(MemoryStorage):
    """limits' in-memory counters, with their expired entries swept on the request path at most once a second.

    The library's own storage sweeps them from a timer thread, which it starts again on every request that comes
    more than 10 ms after the last one: about 0.25 ms of CPU a request, more than the count itself. A counter is
    still judged by its own expiry when read; the sweep only keeps memory from growing with clients long gone.
    """

    STORAGE_SCHEME = ["checkout-memory"]  # noqa: RUF012 (the library declares it so): storage_uri="checkout-memory://"
    _next_sweep = 0.0
    _sweeping = threading.Lock()  # one sweep at a time: the library wrote it for its one timer thread

    def _MemoryStorage__schedule_expiry(self) -> None:  # noqa: N802 (the name the library calls, mangled)
        if time.monotonic() >= self._next_sweep and self._sweeping.acquire(blocking=False):
            try:
                self._next_sweep = time.monotonic() + 1.0
                self._MemoryStorage__expire_events()  # type: ignore[attr-defined]
            finally:
                self._sweeping.release()


def register_rate_limits(app: Flask) -> None:
    setting = settings(app).rate_limit.strip()
    enabled = setting.lower() not in ("off", "false", "0", "")
    redis_url = settings(app).redis_url
    limiter = Limiter(
        key_func=client_key,
        application_limits=[setting] if enabled else [],  # one budget per client, across every route
        storage_uri=redis_url or "checkout-memory://",
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
