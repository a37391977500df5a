"""The messages page (``/lab/messages``): the order-paid events through RabbitMQ, every delivery, and the points.

Beside the shop's ``loyalty`` consumer runs its deliberately wrong twin, ``loyalty-without-inbox``: the same
handler with the inbox swapped for "every delivery is the first", on a queue of its own bound to the same events.
A message redelivered after a consumer died before its ack awards once through the inbox, twice through the twin.
The buttons do what the exercise's commands do (``flask --app checkout events ...``), in this process.
Design: docs/lab.md#checkoutlabmessagespy-a-broker-that-redelivers
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, Flask, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from pika.exceptions import AMQPError

from checkout.events.broker import (
    Broker,
    Delivery,
    QueueState,
    broker_of,
    consume,
    publish_due,
    queue_states,
    register_consumer,
    short_error,
)
from checkout.events.inbox import EventDelivery
from checkout.events.outbox import OutboxEvent, message_id
from checkout.extensions import db
from checkout.i18n import _
from checkout.lab import lab_only
from checkout.shop.loyalty import LOYALTY, ORDER_PAID, LoyaltyConsumer, LoyaltyPoint
from checkout.shop.models import WAS_PAID, Order

bp = lab_only(Blueprint("messages", __name__))

WITHOUT_INBOX = "loyalty-without-inbox"
SHOWN = 30


def every_delivery_is_the_first(_consumer: str, _message_id: str) -> bool:
    """DELIBERATELY WRONG, for the workshop: no inbox, so a redelivered message is handled again."""
    return True


NO_INBOX = LoyaltyConsumer(name=WITHOUT_INBOX, first_time=every_delivery_is_the_first)
CONSUMERS = (LOYALTY, WITHOUT_INBOX)


def register(app: Flask) -> None:
    """The twin's queue, bound to the same events: the publisher declares it, so it gets a copy of each."""
    register_consumer(app, WITHOUT_INBOX, (ORDER_PAID,), NO_INBOX)


class Died(Exception):
    """A consumer dying between its commit and its ack, in this process: its connection closes unacked."""


@dataclass(frozen=True)
class BrokerNow:
    configured: bool
    where: str
    queues: list[QueueState]
    error: str = ""


def _broker_now(broker: Broker | None) -> BrokerNow:
    if broker is None:
        return BrokerNow(False, "", [])
    try:
        return BrokerNow(True, broker.describe(), queue_states(broker))
    except AMQPError as error:
        return BrokerNow(True, broker.describe(), [], short_error(error))


def _counts() -> dict[str, Any]:
    points = dict(
        db.session.execute(sa.select(LoyaltyPoint.consumer, sa.func.count()).group_by(LoyaltyPoint.consumer)).all()
    )
    deliveries = dict(
        db.session.execute(sa.select(EventDelivery.consumer, sa.func.count()).group_by(EventDelivery.consumer)).all()
    )
    paid = db.session.scalar(sa.select(sa.func.count()).select_from(Order).where(Order.status.in_(WAS_PAID)))
    return {"points": points, "deliveries": deliveries, "paid": int(paid or 0)}


@bp.get("/lab/messages")
def page() -> ResponseReturnValue:
    broker = _broker_now(broker_of())  # first: no transaction stays open while the broker is asked
    events = db.session.scalars(sa.select(OutboxEvent).order_by(OutboxEvent.id.desc()).limit(SHOWN)).all()
    deliveries = db.session.scalars(sa.select(EventDelivery).order_by(EventDelivery.id.desc()).limit(SHOWN)).all()
    return render_template(
        "lab/messages.html",
        broker=broker,
        events=events,
        message_id=message_id,
        deliveries=deliveries,
        counts=_counts(),
        consumers=CONSUMERS,
        loyalty=LOYALTY,
        without_inbox=WITHOUT_INBOX,
    )


def _act(action: str, queue: str | None = None) -> None:
    broker = broker_of()
    if broker is None:
        flash(_("CHECKOUT_AMQP_URL is off: there is no broker to talk to."), "error")
        return
    try:
        if action == "publish":
            done = publish_due(broker)
            if done.down:
                flash(_("RabbitMQ did not take the events: %(error)s", error=done.down), "error")
            else:
                flash(_("Published %(count)d event(s).", count=len(done.sent)), "success")
        elif action == "crash" and queue is not None:

            def die(delivery: Delivery, outcome: str) -> None:
                raise Died(f"{delivery.message_id}: {outcome}")

            try:
                consume(broker, queue, until_idle=True, before_ack=die)
                flash(_("The queue %(queue)s is empty: nothing to deliver.", queue=queue), "info")
            except Died as died:
                flash(_("%(queue)s took %(message)s, committed, and died before its ack.", queue=queue, message=died),
                      "success")  # fmt: skip
        elif queue is not None:
            taken = consume(broker, queue, until_idle=True)
            flash(_("%(queue)s took %(count)d message(s), each acked after its commit.", queue=queue, count=taken),
                  "success")  # fmt: skip
    except AMQPError as error:
        flash(_("RabbitMQ is not answering: %(error)s", error=short_error(error)), "error")


@bp.post("/lab/messages/publish")
def publish() -> ResponseReturnValue:
    _act("publish")
    return redirect(url_for("messages.page"), 303)


@bp.post("/lab/messages/<queue>/<action>")
def deliver(queue: str, action: str) -> ResponseReturnValue:
    if queue in CONSUMERS and action in ("consume", "crash"):
        _act(action, queue)
    return redirect(url_for("messages.page", _anchor="deliveries"), 303)
