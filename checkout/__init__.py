"""Checkout: a Flask shop whose checkout cannot charge anyone twice."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask

from checkout.config import (
    FLASK_DEFAULTS,
    SETTINGS,
    SETTINGS_KEY,
    finalize,
    from_environment,
    prepare_instance_folder,
    settings,
)
from checkout.database import configure_engine
from checkout.extensions import csrf, db, migrate, once

__version__ = "0.2.0"  # the one place it is written (pyproject.toml reads it); see CHANGELOG.md
ROOT = Path(__file__).resolve().parent.parent


def create_app(config: Mapping[str, Any] | None = None, *, instance_path: str | None = None) -> Flask:
    """The app: defaults, then the environment, then ``config`` (tests); secrets in ``instance_path``."""
    environment = from_environment(os.environ)
    for name in config or {}:
        if name.startswith("CHECKOUT_") and name not in SETTINGS:
            raise ValueError(f"unknown setting {name}")
    instance_path = instance_path or environment.get("CHECKOUT_INSTANCE_PATH") or None
    app = Flask(
        __name__,
        instance_path=str(Path(instance_path).resolve()) if instance_path else None,
        instance_relative_config=True,
        template_folder=str(ROOT / "templates"),
        static_folder=str(ROOT / "static"),
    )
    app.config.from_mapping(FLASK_DEFAULTS)
    app.config.update(environment)
    if config:
        app.config.update(config)
    prepare_instance_folder(app.instance_path)
    app.extensions[SETTINGS_KEY] = finalize(app.config, app.instance_path)  # typed: settings()

    from checkout.security import register_security

    register_security(app)  # before CSRF: an oversized or malformed body is refused first
    db.init_app(app)
    once.init_app(app)  # the idempotency engine, on the same db (its record table is on db.metadata)
    migrate.init_app(app, db, directory=str(ROOT / "migrations"))
    csrf.init_app(app)

    # Import the models so SQLAlchemy and Alembic see every table.
    from checkout import audit as _audit  # noqa: F401  (the audit trail's table, and the records' mapping)
    from checkout.events import inbox as _inbox  # noqa: F401
    from checkout.events import outbox as _events_outbox  # noqa: F401
    from checkout.gateway import Gateway
    from checkout.gateway import models as _gateway_models  # noqa: F401
    from checkout.lab import servers as _lab_servers  # noqa: F401  (the lab_workers table)
    from checkout.lab import tables as _lab_tables  # noqa: F401  (the lab's accounts, kept while it is on)
    from checkout.lab.mistakes import check_then_insert as _unconstrained  # noqa: F401  (its table is its mistake)
    from checkout.lab.mistakes import models as _mistake_models  # noqa: F401
    from checkout.mail import outbox as _mail_outbox  # noqa: F401
    from checkout.shop import compensation as _compensation  # noqa: F401
    from checkout.shop import loyalty
    from checkout.shop import models as _shop_models  # noqa: F401

    with app.app_context():
        configure_engine(db.engine)
        app.extensions["checkout.gateway"] = Gateway(
            db.engine,
            slow_seconds=settings(app).slow_card_seconds,
            very_slow_seconds=settings(app).very_slow_card_seconds,
            timeout_seconds=settings(app).gateway_timeout_seconds,
        )

    from checkout.audit import register_event_log
    from checkout.gateway.relay import register_deliverer
    from checkout.i18n import register_i18n
    from checkout.limits import register_rate_limits
    from checkout.metrics import register_metrics

    register_deliverer(app)
    loyalty.register(app)  # the loyalty consumer's queue, which the events' publisher declares
    register_rate_limits(app)
    register_i18n(app)
    register_metrics(app)
    register_event_log()
    register_blueprints(app)
    register_template_helpers(app)

    from checkout.cli import register_commands
    from checkout.errors import register_error_handlers
    from checkout.mail.transports import transport_for

    register_error_handlers(app)
    register_commands(app)
    # No thread starts here: the relays are processes of their own (Procfile). A request answered 202 may start one
    # (checkout/idempotency/carry.py, CHECKOUT_CARRIERS).
    transport_for(app)  # a malformed CHECKOUT_SMTP_URL stops the app at start, not the relay later
    return app


def register_blueprints(app: Flask) -> None:
    """The shop's routes; the lab's only while the lab is on. With it off they do not exist (404 for
    every method): a route kept but refused would still answer 405, or 400 to a POST without a CSRF
    token, and say the lab is there."""
    from checkout.openapi import bp as openapi_bp
    from checkout.shop.api import bp as api_bp
    from checkout.shop.cart_api import bp as cart_api_bp
    from checkout.shop.checkout_page import bp as checkout_bp
    from checkout.shop.orders_page import bp as orders_bp
    from checkout.shop.storefront import bp as shop_bp
    from checkout.shop.webhooks import bp as webhooks_bp

    for blueprint in (shop_bp, checkout_bp, orders_bp, api_bp, cart_api_bp, webhooks_bp, openapi_bp):
        app.register_blueprint(blueprint)
    if settings(app).lab:
        register_lab_blueprints(app)


def register_lab_blueprints(app: Flask) -> None:
    from checkout.lab import messages, seats
    from checkout.lab.compensation import bp as compensation_bp
    from checkout.lab.legacy import bp as legacy_gateway_bp
    from checkout.lab.mailbox import bp as mailbox_bp
    from checkout.lab.methods import bp as methods_bp
    from checkout.lab.mistakes.views import bp as mistakes_bp
    from checkout.lab.redis_store import reconcile_redis_store
    from checkout.lab.requests import bp as requests_bp
    from checkout.lab.requests import listen as log_requests
    from checkout.lab.seats import bp as seats_bp
    from checkout.lab.servers import register_server_name
    from checkout.lab.stores import api_bp as redis_store_api_bp
    from checkout.lab.stores import bp as redis_store_bp
    from checkout.lab.tables import listen
    from checkout.lab.unsafe import bp as unsafe_bp
    from checkout.lab.views import bp as lab_bp
    from checkout.shop.identity import READS_ON, SHOP_READS_ON
    from checkout.shop.reconcile import RECONCILERS

    app.extensions.setdefault(RECONCILERS, []).append(reconcile_redis_store)  # its payments have no SQL record
    app.extensions[READS_ON] = SHOP_READS_ON | {unsafe_bp.name}  # the bench's no-store pipeline pays as the shop's
    messages.register(app)  # the loyalty consumer's wrong twin: a queue of its own, bound to the same events
    listen(app)  # the lab's own rows beside the shop's: which checkout placed each order, the stock seeded
    log_requests(app)  # which answers were replays, for the lab's log of the requests under a key
    from checkout.lab.controls import template_switches

    app.context_processor(template_switches)  # the Pay button guard switch, for the checkout page
    lab = (lab_bp, unsafe_bp, mailbox_bp, legacy_gateway_bp, redis_store_api_bp, redis_store_bp, messages.bp)
    for blueprint in (*lab, methods_bp, compensation_bp, mistakes_bp, requests_bp, seats_bp):
        app.register_blueprint(blueprint)
    register_server_name(app)  # behind a proxy, the lab's timeline says which server took each step
    seats.register_commands(app)  # flask workshop seats 20: a room of students on one server


def register_template_helpers(app: Flask) -> None:
    from checkout.i18n import format_money
    from checkout.shop import carts
    from checkout.shop.labels import status_label

    app.add_template_filter(format_money, "money")
    app.add_template_filter(status_label, "status_label")

    @app.context_processor
    def _globals() -> dict[str, Any]:
        return {"cart_count": carts.count(), "lab_enabled": settings(app).lab}
