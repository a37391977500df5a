"""RabbitMQ through pika: the events' publisher and their consumers, each a process of its own.

The publisher sends each unpublished outbox event (persistent, ``mandatory``) on a channel in confirm mode:
``basic_publish`` returns once the broker has taken the message, and only then is the event marked published. A
publisher that dies between the two publishes it again, with the same message id: at least once.
A consumer takes one message at a time (prefetch 1) and acks it after its handler's transaction committed. Killed
before the ack, the message goes back to the queue, and the next consumer gets it again with ``redelivered`` set:
what the handler's inbox (checkout.events.inbox) is for.
pika rather than kombu: each of these AMQP steps (confirm mode, mandatory, prefetch, the ack, the redelivered flag)
is one call of its own here, and they are the lesson; kombu would take them behind its own retry and ack policies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlsplit

import pika
import sqlalchemy as sa
from flask import Flask, current_app
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import AMQPError

from checkout.config import settings
from checkout.database import reading, table_of, utcnow, writing
from checkout.events.outbox import OutboxEvent, message_id

log = logging.getLogger(__name__)

CONSUMERS = "checkout.event_consumers"  # app.extensions: a queue's name -> Consumer
BATCH = 50  # events per round of the publisher
INTERVAL_SECONDS = 1.0  # between the publisher's rounds (--forever)
CONNECT_SECONDS = 3.0
IDLE_SECONDS = 1.0  # a consumer looks at its stop request this often while the queue is empty
ERROR_LENGTH = 300

events = table_of(OutboxEvent)


@dataclass(frozen=True)
class Delivery:
    """One delivery of a message to a consumer: the first, or a redelivery of one that was never acked."""

    message_id: str
    redelivered: bool
    routing_key: str
    body: bytes


HANDLED = "handled"  # the first delivery of its message id: the work is done (acked)
DUPLICATE = "duplicate"  # a copy of a message handled before: nothing done (acked)
REJECTED = "rejected"  # it can never be handled (no message id, not the event): rejected, never delivered again

# A handler runs its own unit of work and says which of the three it was.
Handler = Callable[[Delivery], str]


@dataclass(frozen=True)
class Consumer:
    routing_keys: tuple[str, ...]
    handle: Handler


def register_consumer(app: Flask, queue: str, routing_keys: tuple[str, ...], handle: Handler) -> None:
    """A queue bound to these routing keys, and what consumes it: the publisher declares every registered queue
    before it publishes, so no event is published before its queue exists."""
    app.extensions.setdefault(CONSUMERS, {})[queue] = Consumer(routing_keys, handle)


@dataclass(frozen=True)
class Broker:
    url: str
    exchange: str
    consumers: Mapping[str, Consumer]

    def queue(self, name: str) -> str:
        return f"{self.exchange}.{name}"

    def describe(self) -> str:
        """Where it is, without the password."""
        parts = urlsplit(self.url)
        return f"RabbitMQ at {parts.scheme}://{parts.hostname}:{parts.port or 5672}{parts.path or '/'}"

    def connect(self) -> pika.BlockingConnection:
        parameters = pika.URLParameters(self.url)
        parameters.connection_attempts = 1
        parameters.socket_timeout = CONNECT_SECONDS
        parameters.stack_timeout = CONNECT_SECONDS  # the whole handshake: a broker that accepts and stalls
        parameters.blocked_connection_timeout = 30.0  # a broker out of memory or disk blocks publishers: give up
        return pika.BlockingConnection(parameters)

    def declare(self, channel: BlockingChannel) -> None:
        """The exchange and every queue, durable (they outlive a broker restart), each bound to its keys."""
        channel.exchange_declare(self.exchange, exchange_type="topic", durable=True)
        for name, consumer in self.consumers.items():
            channel.queue_declare(self.queue(name), durable=True)
            for key in consumer.routing_keys:
                channel.queue_bind(self.queue(name), self.exchange, routing_key=key)


def broker_of(app: Flask | None = None) -> Broker | None:
    """The app's broker, or None with ``CHECKOUT_AMQP_URL=off``."""
    app = app or current_app
    url = settings(app).amqp_url
    return Broker(url, settings(app).amqp_exchange, app.extensions.get(CONSUMERS, {})) if url else None


def short_error(error: BaseException) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= ERROR_LENGTH else text[: ERROR_LENGTH - 1] + "…"


# --- the publisher ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pending:
    """An outbox event copied out of its read: nothing holds a transaction while it is published."""

    id: int
    kind: str
    subject: str
    body: str
    created_at: datetime

    @property
    def message_id(self) -> str:
        return message_id(self.kind, self.subject)


@dataclass
class Published:
    """What one round did."""

    broker: str
    sent: list[Pending] = field(default_factory=list)
    down: str | None = None  # why the broker took none, or no more (the rest wait for the next round)


def _due(limit: int) -> list[Pending]:
    with reading() as session:
        rows = session.execute(
            sa.select(events.c.id, events.c.kind, events.c.subject, events.c.body, events.c.created_at)
            .where(events.c.published_at.is_(None))
            .order_by(events.c.id)
            .limit(limit)
        ).all()
        return [Pending(*row) for row in rows]


def _mark_published(event: Pending) -> None:
    with writing() as session:
        session.execute(
            sa.update(events)
            .where(events.c.id == event.id, events.c.published_at.is_(None))
            .values(published_at=utcnow(), attempts=events.c.attempts + 1, last_error=None)
        )


def _mark_failed(event_ids: list[int], error: str) -> None:
    with writing() as session:
        session.execute(
            sa.update(events)
            .where(events.c.id.in_(event_ids), events.c.published_at.is_(None))
            .values(attempts=events.c.attempts + 1, last_error=error)
        )


def publish_due(
    broker: Broker, *, limit: int = BATCH, after_confirm: Callable[[Pending], None] | None = None
) -> Published:
    """One round: publish each unpublished event, oldest first, and mark it published once the broker confirmed it.

    ``after_confirm`` is called between the confirm and the mark (``--crash-after-publish`` dies there).
    """
    done = Published(broker.describe())
    due = _due(limit)
    if not due:
        return done
    left = due
    try:
        connection = broker.connect()
        try:
            channel = connection.channel()
            channel.confirm_delivery()  # basic_publish now waits for the broker's ack (or raises its nack)
            broker.declare(channel)
            for event in due:
                channel.basic_publish(
                    broker.exchange,
                    event.kind,
                    event.body.encode(),
                    pika.BasicProperties(
                        message_id=event.message_id,
                        content_type="application/json",
                        delivery_mode=pika.DeliveryMode.Persistent,
                        timestamp=int(event.created_at.timestamp()),
                    ),
                    mandatory=True,  # no queue bound to its key: returned, an UnroutableError, not lost
                )
                if after_confirm is not None:
                    after_confirm(event)
                _mark_published(event)
                done.sent.append(event)
                left = left[1:]
        finally:
            with suppress(AMQPError):
                connection.close()
    except AMQPError as error:  # down, refused, not routable, or nacked: the rest wait for the next round
        done.down = short_error(error)
        _mark_failed([event.id for event in left], done.down)
        log.warning("events: %s did not take %d event(s): %s", done.broker, len(left), done.down)
    return done


def unpublished() -> int:
    with reading() as session:
        return int(
            session.scalar(sa.select(sa.func.count()).select_from(events).where(events.c.published_at.is_(None))) or 0
        )


# --- a consumer ---------------------------------------------------------------------------------------------


def consume(
    broker: Broker,
    queue: str,
    *,
    until_idle: bool,
    stop: Callable[[], bool] = lambda: False,
    before_ack: Callable[[Delivery, str], None] | None = None,
) -> int:
    """Take the queue's messages one at a time, handle each (its own unit of work) and only then ack it; how many.

    ``until_idle``: return once the queue has been empty for a moment, else once ``stop()`` says so. ``before_ack``
    gets each delivery and its outcome after the handler committed, before the ack (``--crash-before-ack`` dies
    there).
    """
    consumer = broker.consumers[queue]
    taken = 0
    connection = broker.connect()
    try:
        channel = connection.channel()
        broker.declare(channel)
        channel.basic_qos(prefetch_count=1)  # one unacked message at a time: a crash puts back only that one
        for method, properties, body in channel.consume(broker.queue(queue), inactivity_timeout=IDLE_SECONDS):
            if method is None:  # nothing came for a moment
                if until_idle or stop():
                    break
                continue
            delivery = Delivery(properties.message_id or "", bool(method.redelivered), method.routing_key, body)
            outcome = consumer.handle(delivery)
            taken += 1
            if before_ack is not None:
                before_ack(delivery, outcome)
            if outcome == REJECTED:
                channel.basic_reject(method.delivery_tag, requeue=False)
            else:
                channel.basic_ack(method.delivery_tag)
            if stop():
                break
        channel.cancel()
    finally:
        with suppress(AMQPError):
            connection.close()
    return taken


@dataclass(frozen=True)
class QueueState:
    name: str
    ready: int  # waiting for a consumer (a message delivered and not acked yet is not counted)
    consumers: int


def queue_states(broker: Broker) -> list[QueueState]:
    """Each registered queue as the broker sees it now (declaring them: the same declaration changes nothing)."""
    connection = broker.connect()
    try:
        channel = connection.channel()
        broker.declare(channel)
        states = []
        for name in broker.consumers:
            declared = channel.queue_declare(broker.queue(name), durable=True).method
            states.append(QueueState(name, int(declared.message_count), int(declared.consumer_count)))
        return states
    finally:
        with suppress(AMQPError):
            connection.close()
