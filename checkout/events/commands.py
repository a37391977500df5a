"""``flask --app checkout events publish`` and ``events consume <queue>``: one round, ``--forever``, or a crash on
purpose for the workshop (``--crash-after-publish``, ``--crash-before-ack``)."""

from __future__ import annotations

import os
import sys
import threading
import time

import click
from flask import current_app
from flask.cli import AppGroup
from pika.exceptions import AMQPError

from checkout.events.broker import (
    CONSUMERS,
    INTERVAL_SECONDS,
    Broker,
    Delivery,
    Pending,
    broker_of,
    consume,
    publish_due,
    short_error,
    unpublished,
)
from checkout.forever import run_forever

events = AppGroup("events", help="Events through RabbitMQ: publish the outbox's, consume a queue's.")
CONSUME_INTERVAL_SECONDS = 2.0  # between two tries when the broker is away


def _broker(*, forever: bool) -> Broker | None:
    found = broker_of(current_app)
    if found is None:
        waiting = "" if forever else f"; {unpublished()} event(s) wait in the outbox"
        click.echo(f"CHECKOUT_AMQP_URL is off: no broker to talk to{waiting}")
    return found


def _die(what: str) -> None:
    """For the workshop: end the process at once, as kill -9 would: nothing more is written, nothing acked."""
    print(what, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)


@events.command("publish")
@click.option("--forever", is_flag=True, help="Keep publishing until Ctrl-C or SIGTERM (its own process).")
@click.option("--interval", type=click.FloatRange(min=0, min_open=True), default=INTERVAL_SECONDS, show_default=True)
@click.option("--crash-after-publish", is_flag=True, help="Workshop: publish ONE event, then die before marking it.")
def publish_command(forever: bool, interval: float, crash_after_publish: bool) -> None:
    """Publish the outbox's unpublished events, each marked published once the broker confirmed it."""
    if forever and crash_after_publish:
        raise click.UsageError("--crash-after-publish publishes one event and dies: it cannot run --forever")
    broker = _broker(forever=forever)
    if broker is None:
        if forever:  # a Procfile process that ends would end them all (honcho): wait, as with a broker away
            run_forever(lambda _stop: None, interval=60, doing="waiting (no broker)", stopping="now")
        return

    def dying(event: Pending) -> None:
        _die(f"published {event.message_id}; dying now, before marking it published")

    def round_(quiet: bool) -> bool:
        """One round; False if the broker took none, or not all."""
        done = publish_due(broker, limit=1, after_confirm=dying) if crash_after_publish else publish_due(broker)
        for event in done.sent:
            click.echo(f"published {event.message_id} to {done.broker}")
        if done.down:
            click.echo(f"{done.broker} did not take the events ({done.down}); they wait in the outbox", err=True)
        elif not quiet:
            click.echo(f"published {len(done.sent)}; {unpublished()} left in the outbox")
        return done.down is None

    if forever:

        def every_round(_stop: threading.Event) -> None:
            round_(quiet=True)

        run_forever(
            every_round, interval=interval, doing=f"publishing to {broker.describe()}", stopping="after this round"
        )
    elif not round_(quiet=False):
        click.get_current_context().exit(1)


@events.command("consume")
@click.argument("queue", default="loyalty")
@click.option("--forever", is_flag=True, help="Keep consuming until Ctrl-C or SIGTERM (its own process).")
@click.option("--crash-before-ack", is_flag=True, help="Workshop: handle ONE message, then die before acking it.")
@click.option(
    "--pause-before-ack",
    type=click.FloatRange(min=0),
    default=0.0,
    help="Workshop: wait this many seconds after each commit, before the ack: time to kill -9 it mid-message.",
)
def consume_command(queue: str, forever: bool, crash_before_ack: bool, pause_before_ack: float) -> None:
    """Consume QUEUE (loyalty, or the lab's loyalty-without-inbox): handle each message, then ack it."""
    known = current_app.extensions.get(CONSUMERS, {})
    if queue not in known:
        raise click.UsageError(f"no consumer of {queue!r} here; the queues are: {', '.join(known)}")
    if forever and crash_before_ack:
        raise click.UsageError("--crash-before-ack handles one message and dies: it cannot run --forever")
    broker = _broker(forever=forever)
    if broker is None:
        if forever:
            run_forever(lambda _stop: None, interval=60, doing="waiting (no broker)", stopping="now")
        return

    def report(delivery: Delivery, outcome: str) -> None:
        first = "redelivered" if delivery.redelivered else "first delivery"
        click.echo(f"{queue}: {delivery.message_id or '(no message id)'} ({first}): {outcome}")
        if crash_before_ack:
            _die(f"{queue}: {outcome} {delivery.message_id} and committed; dying now, before the ack")
        if pause_before_ack:
            click.echo(f"{queue}: committed; waiting {pause_before_ack:g} s before the ack (kill -9 {os.getpid()} now)")
            time.sleep(pause_before_ack)

    if forever:

        def until_stopped(stop: threading.Event) -> None:  # returns on a stop request; raises if the broker goes
            consume(broker, queue, until_idle=False, stop=stop.is_set, before_ack=report)

        run_forever(
            until_stopped,
            interval=CONSUME_INTERVAL_SECONDS,
            doing=f"consuming {broker.queue(queue)} at {broker.describe()}",
            stopping="after this message",
        )
        return
    try:
        taken = consume(broker, queue, until_idle=True, before_ack=report)
    except AMQPError as error:
        click.echo(f"{broker.describe()} is not answering ({short_error(error)})", err=True)
        click.get_current_context().exit(1)
    click.echo(f"{queue}: {taken} message(s) taken; the queue is empty for now")
