"""The order-paid event through a real RabbitMQ: published from the outbox at least once, a loyalty point awarded
once per order through the consumer's inbox, whatever the broker redelivers; the twin without the inbox, twice.
A consumer or publisher that dies is a real process (``flask --app checkout events consume``), killed for real; a run
that ends by itself is the same command in this process (``Rabbit.cli``), which spares a second of imports."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout.config import settings
from checkout.events.broker import publish_due, queue_states
from checkout.events.inbox import EventDelivery, InboxMessage
from checkout.events.outbox import OutboxEvent
from checkout.extensions import db
from checkout.lab.messages import WITHOUT_INBOX
from checkout.shop.loyalty import LOYALTY, LoyaltyPoint
from tests.helpers import ALICE, Ledger, order_body, wait_for
from tests.mailing import flask_here, killed_at_the_end, relay_environment
from tests.rabbitmq import Rabbit

pytestmark = pytest.mark.server  # consumers and publishers as processes of their own


def pay(client: FlaskClient, count: int = 1) -> list[str]:
    """``count`` paid orders through the API; their ids."""
    paid = []
    for number in range(count):
        answer = client.post(
            "/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": f"evt-{number:016d}"}
        )
        assert answer.status_code == 201, answer.get_json()
        paid.append(answer.get_json()["id"])
    return paid


def points(app: Flask, consumer: str = LOYALTY) -> int:
    with app.app_context():
        return int(db.session.scalar(sa.select(sa.func.count()).where(LoyaltyPoint.consumer == consumer)) or 0)


def deliveries(app: Flask, consumer: str = LOYALTY) -> list[tuple[bool, str]]:
    """(redelivered, outcome) of each delivery, in order."""
    with app.app_context():
        rows = db.session.execute(
            sa.select(EventDelivery.redelivered, EventDelivery.outcome)
            .where(EventDelivery.consumer == consumer)
            .order_by(EventDelivery.id)
        ).all()
        return [(bool(row[0]), str(row[1])) for row in rows]


def publish(app: Flask, rabbit: Rabbit) -> int:
    with app.app_context():
        done = publish_due(rabbit.broker)
    assert done.down is None, done.down
    return len(done.sent)


@contextmanager
def consumer_forever(app: Flask, rabbit: Rabbit, queue: str, *options: str) -> Iterator[subprocess.Popen[bytes]]:
    """``flask events consume <queue> --forever`` as a process of its own, killed at the end if still running."""
    folder = Path(app.instance_path)
    with (folder / f"{queue}.out").open("wb") as out, (folder / f"{queue}.err").open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "checkout", "events", "consume", queue, "--forever", *options],
            env=relay_environment(app, rabbit.database_url),
            cwd=app.instance_path,
            stdout=out,
            stderr=err,
        )
    with killed_at_the_end(process):
        yield process


def test_paying_writes_one_order_paid_event_whatever_the_retries(client: FlaskClient, app: Flask) -> None:
    [order_id] = pay(client)
    pay(client)  # the same key again: a replay, no second event
    with app.app_context():
        events = db.session.execute(sa.select(OutboxEvent.kind, OutboxEvent.subject, OutboxEvent.body)).all()
    assert [(kind, subject) for kind, subject, _ in events] == [("order.paid", order_id)]
    assert json.loads(events[0][2])["order_id"] == order_id


def test_an_event_is_marked_published_once_the_broker_confirmed_it(
    client: FlaskClient, app: Flask, rabbit: Rabbit
) -> None:
    pay(client)
    assert publish(app, rabbit) == 1
    with app.app_context():
        [event] = db.session.scalars(sa.select(OutboxEvent)).all()
        assert event.published_at is not None and event.attempts == 1
        queues = {state.name: state.ready for state in queue_states(rabbit.broker)}
    assert queues == {LOYALTY: 1, WITHOUT_INBOX: 1}  # each queue bound to order.paid has its copy
    assert publish(app, rabbit) == 0


def test_without_a_broker_the_shop_pays_and_the_event_waits_in_the_outbox(client: FlaskClient, app: Flask) -> None:
    settings(app).amqp_url = "amqp://guest:guest@127.0.0.1:1/%2F"  # nobody listens there
    pay(client)
    published = flask_here(app, "events", "publish")
    assert published.returncode == 1 and "did not take the events" in published.stderr
    with app.app_context():
        [event] = db.session.scalars(sa.select(OutboxEvent)).all()
    assert event.published_at is None and event.attempts == 1 and event.last_error


def test_a_message_redelivered_after_the_consumer_died_before_its_ack_awards_once(
    client: FlaskClient, app: Flask, rabbit: Rabbit
) -> None:
    pay(client)
    publish(app, rabbit)
    crashed = rabbit.flask("events", "consume", LOYALTY, "--crash-before-ack")
    assert crashed.returncode == 1 and "dying now, before the ack" in crashed.stderr
    assert points(app) == 1 and deliveries(app) == [(False, "handled")]
    again = rabbit.cli("events", "consume", LOYALTY)
    assert again.returncode == 0, again.stderr
    assert "(redelivered): duplicate" in again.stdout
    assert points(app) == 1 and deliveries(app) == [(False, "handled"), (True, "duplicate")]


def test_the_twin_without_an_inbox_awards_a_redelivered_message_twice(
    client: FlaskClient, app: Flask, rabbit: Rabbit
) -> None:
    pay(client)
    publish(app, rabbit)
    assert rabbit.flask("events", "consume", WITHOUT_INBOX, "--crash-before-ack").returncode == 1
    assert rabbit.cli("events", "consume", WITHOUT_INBOX).returncode == 0
    assert points(app, WITHOUT_INBOX) == 2  # one order, two points: what the inbox prevents
    assert deliveries(app, WITHOUT_INBOX) == [(False, "handled"), (True, "handled")]
    assert points(app) == 0  # the real consumer's queue still holds its copy, untouched


def test_twenty_paid_orders_while_the_consumer_is_killed_twice_mid_message_award_twenty_points(
    client: FlaskClient, app: Flask, rabbit: Rabbit
) -> None:
    pay(client, 20)
    assert publish(app, rabbit) == 20
    for kill in (1, 2):
        # Mid-message: its point and inbox row are committed, the ack not sent (it waits 30 s before it).
        with consumer_forever(app, rabbit, LOYALTY, "--pause-before-ack", "30") as consumer:
            wait_for(lambda kill=kill: len(deliveries(app)) == kill, timeout=30)
            consumer.send_signal(signal.SIGKILL)
    drained = rabbit.cli("events", "consume", LOYALTY)
    assert drained.returncode == 0, drained.stderr
    assert points(app) == 20
    seen = deliveries(app)
    assert len(seen) == 22 and sum(redelivered for redelivered, _outcome in seen) >= 2
    assert sum(outcome == "handled" for _redelivered, outcome in seen) == 20
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(InboxMessage)) == 20


def test_a_message_without_an_id_is_rejected_and_never_redelivered(app: Flask, rabbit: Rabbit) -> None:
    rabbit.publish_raw(b'{"order_id": "ord_x", "customer_id": 1}', message_id=None)
    rabbit.publish_raw(b"not json", message_id="order.paid:ord_y")
    consumed = rabbit.cli("events", "consume", LOYALTY)
    assert consumed.returncode == 0, consumed.stderr
    assert deliveries(app) == [(False, "rejected"), (False, "rejected")] and points(app) == 0
    assert (
        rabbit.cli("events", "consume", LOYALTY)
        .stdout.strip()
        .endswith("0 message(s) taken; the queue is empty for now")
    )


def test_a_message_for_a_customer_the_shop_does_not_know_is_rejected_and_the_queue_moves_on(
    client: FlaskClient, app: Flask, rabbit: Rabbit
) -> None:
    rabbit.publish_raw(b'{"order_id": "ord_ghost", "customer_id": 987654321}', message_id="order.paid:ord_ghost")
    [order_id] = pay(client)
    publish(app, rabbit)
    consumed = rabbit.cli("events", "consume", LOYALTY)
    assert consumed.returncode == 0, consumed.stderr
    assert [outcome for _redelivered, outcome in deliveries(app)] == ["rejected", "handled"]
    with app.app_context():
        assert db.session.scalars(sa.select(LoyaltyPoint.order_id)).all() == [order_id]


def test_the_publisher_dying_before_it_marks_publishes_again_and_the_inbox_keeps_one(
    client: FlaskClient, app: Flask, rabbit: Rabbit
) -> None:
    pay(client)
    crashed = rabbit.flask("events", "publish", "--crash-after-publish")
    assert crashed.returncode == 1 and "dying now, before marking it published" in crashed.stderr
    assert publish(app, rabbit) == 1  # not marked: published again, with the same message id
    assert rabbit.cli("events", "consume", LOYALTY).returncode == 0
    assert points(app) == 1 and [outcome for _r, outcome in deliveries(app)] == ["handled", "duplicate"]


def test_two_consumers_at_once_award_each_order_once(
    client: FlaskClient, app: Flask, rabbit: Rabbit, ledger: Ledger
) -> None:
    pay(client, 10)
    publish(app, rabbit)
    publish_again = rabbit.cli("events", "publish")  # nothing left: every event was confirmed and marked
    assert "published 0" in publish_again.stdout
    with consumer_forever(app, rabbit, LOYALTY), consumer_forever(app, rabbit, LOYALTY):
        wait_for(lambda: points(app) == 10, timeout=30)
    assert points(app) == 10 and len(ledger.orders()) == 10
