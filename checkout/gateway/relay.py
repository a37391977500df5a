"""The mock gateway's delivery service, wired into the app.

A real provider runs its own webhook delivery; this mock's is a process of
its own, ``flask --app checkout gateway deliver --forever`` (the Procfile's
``webhooks``, which ``make run`` starts), never a thread in a web worker.
The lab's buttons deliver too, from the request that pressed them. The URL is
``CHECKOUT_WEBHOOK_URL``, else ``CHECKOUT_SHOP_URL`` + ``/webhooks/gateway``:
always configured, never taken from a request, whose Host header anyone can
forge.
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
