"""Per-client rate limits (Flask-Limiter): one client cannot starve everyone else.

A client is the customer whose API token it sends, else its address, so made-up tokens buy no budget of their own.
Counters live in Redis when ``CHECKOUT_REDIS_URL`` is set, else (and while Redis does not answer) in worker memory.
Design: docs/design.md#checkoutlimitspy-per-client-rate-limits
"""

from __future__ import annotations

import logging
import math
import time

import sqlalchemy as sa
from flask import Flask, current_app, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

from checkout.extensions import db
from checkout.shop.identity import ApiCustomer, api_customer, bearer_token

log = logging.getLogger(__name__)


def client_key() -> str:
    """Whom a request counts against: the customer whose bearer token it carries, else its address."""
    customer = _token_holder() if bearer_token() is not None else None
    if customer is not None:
        return "customer:" + customer.public_id
    return "address:" + (get_remote_address() or "unknown")


def _token_holder() -> ApiCustomer | None:
    """The token's customer (one indexed read, kept for the view on flask.g), with the read over after it.

    The view may call the gateway, which needs no transaction open (checkout.transactions), and
    Flask-Limiter takes an exception here for its storage failing: a database that does not answer
    counts the request by its address, and the view meets the database's error itself.
    """
    session = db.session()
    already_open = session.in_transaction()
    try:
        return api_customer()
    except sa.exc.SQLAlchemyError as error:
        log.warning("rate limit: the token's customer could not be read (%s); counting by address", error)
        return None
    finally:
        if not already_open:
            session.rollback()


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
