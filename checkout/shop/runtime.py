"""The app's configured collaborators, for the views."""

from __future__ import annotations

from flask import current_app

from checkout.gateway import Gateway
from checkout.idempotency import Settings


def idempotency_settings() -> Settings:
    config = current_app.config
    return Settings(
        lease_seconds=float(config["CHECKOUT_LEASE_SECONDS"]),
        lifetime_seconds=float(config["CHECKOUT_KEY_LIFETIME_SECONDS"]),
    )


def gateway() -> Gateway:
    gw: Gateway = current_app.extensions["checkout.gateway"]
    return gw


def fingerprint_secret() -> str:
    return str(current_app.config["SECRET_KEY"])
