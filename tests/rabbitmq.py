"""The RabbitMQ the tests use: ``TEST_AMQP_URL`` (default the local broker, guest/guest), an exchange of each test's
own (so parallel tests, and a shop running on the same broker, never see each other's messages), deleted after it
with its queues. Without an answering broker the tests that need one are skipped, saying so."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

import pika
import pytest
from flask import Flask
from pika.exceptions import AMQPError

from checkout.config import settings
from checkout.events.broker import Broker, broker_of
from tests.mailing import flask_here, flask_process

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"


@dataclass(frozen=True)
class Rabbit:
    app: Flask
    database_url: str

    @property
    def broker(self) -> Broker:
        found = broker_of(self.app)
        assert found is not None
        return found

    def flask(self, *arguments: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``flask --app checkout <arguments>`` as a real process, on the test's database and broker."""
        return flask_process(self.app, self.database_url, *arguments, timeout=timeout)

    def cli(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        """The same command in this process (for a run that ends by itself)."""
        return flask_here(self.app, *arguments)

    def publish_raw(self, body: bytes, *, message_id: str | None, routing_key: str = "order.paid") -> None:
        """A message as any publisher might send it (no outbox), into the test's exchange."""
        connection = self.broker.connect()
        try:
            channel = connection.channel()
            channel.confirm_delivery()
            self.broker.declare(channel)
            properties = pika.BasicProperties(message_id=message_id, delivery_mode=pika.DeliveryMode.Persistent)
            channel.basic_publish(self.broker.exchange, routing_key, body, properties, mandatory=True)
        finally:
            connection.close()


def _delete(broker: Broker) -> None:
    with suppress(AMQPError):
        connection = broker.connect()
        try:
            channel = connection.channel()
            for name in broker.consumers:
                channel.queue_delete(broker.queue(name))
            channel.exchange_delete(broker.exchange)
        finally:
            connection.close()


@contextmanager
def rabbit_for(app: Flask, database_url: str) -> Iterator[Rabbit]:
    """The test's broker (the ``rabbit`` fixture): ``app`` now publishes to an exchange of its own."""
    url = os.environ.get("TEST_AMQP_URL", DEFAULT_URL)
    try:
        pika.BlockingConnection(pika.URLParameters(url + ("&" if "?" in url else "?") + "socket_timeout=2")).close()
    except AMQPError as error:
        pytest.skip(f"no RabbitMQ answers at {url} ({type(error).__name__}); set TEST_AMQP_URL, or start one")
    settings(app).amqp_url = url
    settings(app).amqp_exchange = f"test-{uuid.uuid4().hex[:12]}"
    rabbit = Rabbit(app, database_url)
    try:
        yield rabbit
    finally:
        _delete(rabbit.broker)
