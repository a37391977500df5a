"""The mock gateway's delivery service, wired into the app for development.

A real provider runs its own webhook delivery; this mock has none, so in
development each worker process runs a small background thread that
delivers due events every second (``CHECKOUT_WEBHOOK_RELAY=thread``). In
production, run ``flask --app checkout gateway deliver --forever`` as its
own process instead. The URL is ``CHECKOUT_WEBHOOK_URL``, else
``CHECKOUT_SHOP_URL`` + ``/webhooks/gateway``: always configured, never taken
from a request, whose Host header anyone can forge.
"""

from __future__ import annotations

import logging
import os
import threading

from flask import Flask
from sqlalchemy.exc import OperationalError

from checkout.gateway.webhooks import Deliverer

log = logging.getLogger(__name__)
PATH = "/webhooks/gateway"
RELAY_THREAD = "webhook-relay"
INTERVAL_SECONDS = 1.0  # between rounds of the thread and of --forever (its --interval)
RELAY_STOP = "checkout.webhook_relay_stop"


def deliverer(app: Flask) -> Deliverer:
    found: Deliverer = app.extensions["checkout.deliverer"]
    return found


def shop_url(app: Flask) -> str:
    """This shop's own base address, as configured: where its server-side requests to itself go."""
    return str(app.config["CHECKOUT_SHOP_URL"]).rstrip("/")


def webhook_url(app: Flask) -> str:
    return str(app.config["CHECKOUT_WEBHOOK_URL"]) or shop_url(app) + PATH


def register_webhook_relay(app: Flask) -> None:
    app.extensions["checkout.deliverer"] = Deliverer(
        app.extensions["checkout.gateway"].engine,
        secret=str(app.config["CHECKOUT_WEBHOOK_SECRET"]),
        duplicate_rate=float(app.config["CHECKOUT_WEBHOOK_DUPLICATE_RATE"]),
    )
    if app.config["CHECKOUT_WEBHOOK_RELAY"] != "thread":
        return
    stop = app.extensions[RELAY_STOP] = threading.Event()
    started: dict[str, int] = {}
    guard = threading.Lock()

    @app.before_request
    def _start_relay_in_this_process() -> None:
        # gunicorn forks its workers after the app is made: start the thread in the worker, once.
        if started.get("pid") == os.getpid():
            return
        with guard:
            if started.get("pid") == os.getpid():
                return
            thread = threading.Thread(target=_relay, args=(app, stop), name=RELAY_THREAD, daemon=True)
            thread.start()
            started["pid"] = os.getpid()


def stop_webhook_relay(app: Flask) -> None:
    """Ask this app's background relay to stop after its current round (tests; a clean shutdown)."""
    stop: threading.Event | None = app.extensions.get(RELAY_STOP)
    if stop is not None:
        stop.set()


def _relay(app: Flask, stop: threading.Event) -> None:
    while not stop.wait(INTERVAL_SECONDS):
        try:
            deliverer(app).deliver_due(webhook_url(app))
        except OperationalError as busy:  # SQLite's writer is busy, or the database restarts: one line, not a trace
            log.warning("webhook delivery waits for the database (%s); trying again", busy.orig)
        except Exception:  # the shop may be restarting: try again in a second
            log.warning("webhook delivery failed; trying again", exc_info=True)
