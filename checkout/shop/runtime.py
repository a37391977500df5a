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
        waiters_per_key=int(config["CHECKOUT_WAITERS_PER_KEY"]),
    )


def gateway() -> Gateway:
    gw: Gateway = current_app.extensions["checkout.gateway"]
    return gw


def fingerprint_secret() -> str:
    """Its own secret, not SECRET_KEY: the fingerprints cover card numbers."""
    return str(current_app.config["CHECKOUT_FINGERPRINT_SECRET"])
