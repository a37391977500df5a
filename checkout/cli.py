"""Command line: seed, the idempotency housekeeping, and the relays (each its own process with --forever)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import click
from flask import Flask, current_app
from flask.cli import AppGroup

from checkout.audit import purge_old_events
from checkout.config import settings
from checkout.database import writing
from checkout.events.commands import events
from checkout.extensions import once
from checkout.forever import run_forever
from checkout.gateway import Refund
from checkout.gateway.relay import INTERVAL_SECONDS as GATEWAY_INTERVAL_SECONDS
from checkout.gateway.relay import deliverer, webhook_url
from checkout.gateway.webhooks import Delivery
from checkout.mail.relay import INTERVAL_SECONDS as OUTBOX_INTERVAL_SECONDS
from checkout.shop.compensation import REFUNDED, Orphan, compensate_all
from checkout.shop.payment import gateway
from checkout.shop.reconcile import reconcile
from checkout.shop.reconciliation_report import reconciliation_report
from checkout.shop.seed import seed

Command = TypeVar("Command", bound=Callable[..., Any])


def relay_options(doing: str, interval: float) -> Callable[[Command], Command]:
    """A relay's ``--forever`` (its own process, until Ctrl-C or SIGTERM) and ``--interval`` between rounds."""

    def add(command: Command) -> Command:
        command = click.option(
            "--interval",
            type=click.FloatRange(min=0, min_open=True),
            default=interval,
            show_default=True,
            help="With --forever: seconds between two rounds.",
        )(command)
        return click.option("--forever", is_flag=True, help=f"Keep {doing} until Ctrl-C or SIGTERM (its own process).")(
            command
        )

    return add


def register_commands(app: Flask) -> None:
    @app.cli.command("seed")
    @click.option("--reset", is_flag=True, help="Put every product's seeded stock back on the shelf.")
    def seed_command(reset: bool) -> None:
        """Products and the demo customers alice and bob (safe to run twice: today's stock stays)."""
        demo = settings().env != "production"
        with writing():
            added = seed(demo_customers=demo, reset_stock=reset)
        click.echo(f"seeded: {added['products']} new products, {added['customers']} new demo customers")
        if reset:
            click.echo("stock reset to the seeded quantities")
        if demo:
            click.echo("demo API tokens: demo-alice-token (alice), demo-bob-token (bob)")

    idempotency = AppGroup("idempotency", help="Housekeeping of idempotency records.")

    @idempotency.command("purge")
    def purge_command() -> None:
        """Delete completed records past their lifetime with their audit events (never an unfinished one)."""
        removed = once.store.purge()  # their audit events go with them (checkout.audit)
        purge_old_events(once.settings().lifetime_seconds)
        click.echo(f"purged {removed} expired idempotency records (and their audit events)")

    @idempotency.command("reconcile")
    def reconcile_command() -> None:
        """Finish operations abandoned past their lease, by asking the gateway."""
        results = reconcile(gateway())
        for result in results:
            click.echo(str(result))
        finished = [r for r in results if r.endpoint != "compensation"]
        click.echo(f"reconciled {sum(r.outcome != 'skipped' for r in finished)} abandoned operations")
        if compensated := [r for r in results if r.endpoint == "compensation"]:
            click.echo(f"compensated {sum(r.outcome == REFUNDED for r in compensated)} orphan charge(s)")

    app.cli.add_command(idempotency)

    gateway_commands = AppGroup("gateway", help="The mock payment gateway's own jobs.")

    @gateway_commands.command("deliver")
    @relay_options("delivering", GATEWAY_INTERVAL_SECONDS)
    @click.option(
        "--url", default=None, help="Where to POST (default: CHECKOUT_WEBHOOK_URL, else CHECKOUT_SHOP_URL's webhook)."
    )
    def deliver_command(forever: bool, interval: float, url: str | None) -> None:
        """Deliver the gateway's due events (webhooks) to the shop, at least once."""
        if not url and settings().env == "production" and not settings().webhook_url:
            # The development default (CHECKOUT_SHOP_URL's /webhooks/gateway) is no address for production.
            raise click.UsageError(
                "CHECKOUT_ENV=production needs CHECKOUT_WEBHOOK_URL (or --url): the full address of the shop's "
                "/webhooks/gateway, for example https://shop.example/webhooks/gateway"
            )
        target = url or webhook_url(current_app)

        def deliver_due(_stop: threading.Event | None = None) -> list[Delivery]:
            deliveries = deliverer(current_app).deliver_due(target)
            for delivery in deliveries:
                kind = "again (duplicate)" if delivery.duplicate else "delivered" if delivery.delivered else "failed"
                click.echo(f"{delivery.event_id} {delivery.type}: {kind} ({delivery.status})")
            return deliveries

        if forever:
            run_forever(deliver_due, interval=interval, doing=f"delivering to {target}", stopping="after this round")
            return
        first = [d for d in deliver_due() if not d.duplicate]  # a round: once more, later, for what failed
        failed = sum(not d.delivered for d in first)
        click.echo(f"{len(first) - failed} delivered, {failed} failed, to {target}" if first else "nothing was due")

    @gateway_commands.command("compensate")
    @click.option(
        "--crash-after-refund", is_flag=True, help="Workshop: refund ONE orphan charge, then die before recording it."
    )
    def compensate_command(crash_after_refund: bool) -> None:
        """Refund each orphan charge (made for an order that ended unpaid) once, under compensate-<charge id>."""

        def dying(orphan: Orphan, refund: Refund) -> None:
            click.echo(f"refunded {orphan.charge_id} ({refund.id}); dying now, before recording it", err=True)
            os._exit(1)

        done = compensate_all(gateway(), after_refund=dying if crash_after_refund else None)
        for compensated in done:
            click.echo(str(compensated))
        click.echo(f"compensated {sum(c.outcome == REFUNDED for c in done)} orphan charge(s)")

    @gateway_commands.command("reconcile-report")
    def reconcile_report_command() -> None:
        """Compare the shop's ledger with the gateway's: exit 0 when they agree, 1 with the list when not."""
        report = reconciliation_report()
        for discrepancy in report.discrepancies:
            click.echo(str(discrepancy))
        click.echo(report.summary())
        if not report.clean:
            click.get_current_context().exit(1)

    app.cli.add_command(gateway_commands)

    outbox = AppGroup("outbox", help="The email outbox: send what the shop wrote, at least once.")

    @outbox.command("relay")
    @relay_options("relaying", OUTBOX_INTERVAL_SECONDS)
    @click.option(
        "--crash-after-send", is_flag=True, help="Workshop: send ONE message, then die before marking it sent."
    )
    def relay_command(forever: bool, interval: float, crash_after_send: bool) -> None:
        """Send the unsent messages (one round): claim each, send it, and only then mark it sent."""
        from checkout.mail.commands import relay

        relay(forever=forever, crash_after_send=crash_after_send, interval=interval)

    app.cli.add_command(outbox)
    app.cli.add_command(events)
