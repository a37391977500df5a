"""The mock gateway's delivery service, wired into the app: a process of its own (``gateway deliver --forever``),
never a thread in a web worker. Its URL is always configured, never taken from a request's forgeable Host header.
Design: docs/design.md#checkoutgatewaywebhookspy-and-checkoutgatewayrelaypy-delivering-the-gateways-events
"""

from __future__ import annotations

from flask import Flask

from checkout.config import settings
from checkout.gateway.webhooks import Deliverer

PATH = "/webhooks/gateway"
INTERVAL_SECONDS = 1.0  # between rounds of --forever (its --interval)


def deliverer(app: Flask) -> Deliverer:
    found: Deliverer = app.extensions["checkout.deliverer"]
    return found


def shop_url(app: Flask) -> str:
    """This shop's own base address, as configured: where its server-side requests to itself go."""
    return settings(app).shop_url


def webhook_url(app: Flask) -> str:
    return settings(app).webhook_url or shop_url(app) + PATH


def register_deliverer(app: Flask) -> None:
    app.extensions["checkout.deliverer"] = Deliverer(
        app.extensions["checkout.gateway"].engine,
        secret=settings(app).webhook_secret,
        duplicate_rate=settings(app).webhook_duplicate_rate,
    )
