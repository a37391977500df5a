"""The mock gateway's delivery service, wired into the app: a process of its own (``gateway deliver --forever``),
never a thread in a web worker. Its URL is always configured, never taken from a request's forgeable Host header.
Design: docs/design.md#checkoutgatewaywebhookspy-and-checkoutgatewayrelaypy-delivering-the-gateways-events
"""

from __future__ import annotations

from flask import Flask

from checkout.gateway.webhooks import Deliverer

PATH = "/webhooks/gateway"
INTERVAL_SECONDS = 1.0  # between rounds of --forever (its --interval)


def deliverer(app: Flask) -> Deliverer:
    found: Deliverer = app.extensions["checkout.deliverer"]
    return found


def shop_url(app: Flask) -> str:
    """This shop's own base address, as configured: where its server-side requests to itself go."""
    return str(app.config["CHECKOUT_SHOP_URL"]).rstrip("/")


def webhook_url(app: Flask) -> str:
    return str(app.config["CHECKOUT_WEBHOOK_URL"]) or shop_url(app) + PATH


def register_deliverer(app: Flask) -> None:
    app.extensions["checkout.deliverer"] = Deliverer(
        app.extensions["checkout.gateway"].engine,
        secret=str(app.config["CHECKOUT_WEBHOOK_SECRET"]),
        duplicate_rate=float(app.config["CHECKOUT_WEBHOOK_DUPLICATE_RATE"]),
    )
