"""A loyalty point per paid order, awarded by a consumer of the order-paid event that RabbitMQ may deliver twice.

Paying an order writes ``order.paid`` into the events' outbox (``order_paid``, in the transaction that marks it
paid); the publisher sends it to RabbitMQ at least once; the ``loyalty`` consumer awards the point, its inbox row
and its delivery in one unit of work, and acks after that commit. A redelivery finds its message id in the inbox.
Design: docs/design.md#checkoutshoployaltypy-a-point-per-paid-order-once
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from flask import Flask
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from checkout.database import Base, BigId, UTCDateTime, utcnow, writing
from checkout.events.broker import DUPLICATE, HANDLED, REJECTED, Delivery, register_consumer
from checkout.events.inbox import first_delivery, note_delivery
from checkout.events.outbox import publish_later
from checkout.extensions import db
from checkout.shop.orders import OrderView

ORDER_PAID = "order.paid"  # the event's kind, and its routing key
LOYALTY = "loyalty"  # the consumer, and its queue (after the exchange: checkout.loyalty)
MAX_MESSAGE_ID = 128  # the inbox's column


class LoyaltyPoint(Base):
    """A point awarded, with the message that earned it. No unique constraint on the order: the inbox is the
    defence here, and the lab's twin without it shows what a redelivery does then."""

    __tablename__ = "loyalty_points"
    __table_args__ = (sa.Index("ix_loyalty_points_consumer_customer", "consumer", "customer_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    consumer: Mapped[str] = mapped_column(sa.String(64))  # loyalty; the lab's twin writes its own
    customer_id: Mapped[int] = mapped_column(BigId, sa.ForeignKey("customers.id"))
    order_id: Mapped[str] = mapped_column(sa.String(32))  # the order's public id
    message_id: Mapped[str] = mapped_column(sa.String(MAX_MESSAGE_ID))
    awarded_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


def order_paid(order: OrderView) -> None:
    """The event, in the unit of work that marks ``order`` paid (one per order: the outbox is unique on it)."""
    payload = {"order_id": order.public_id, "customer_id": order.customer_id, "total_cents": order.total_cents}
    publish_later(ORDER_PAID, order.public_id, {**payload, "currency": order.currency})


@dataclass(frozen=True)
class PaidOrder:
    order_id: str
    customer_id: int

    @classmethod
    def of(cls, delivery: Delivery) -> PaidOrder | None:
        """The event a delivery carries, or None if it is not one this consumer can handle."""
        try:
            event = json.loads(delivery.body)
            order_id, customer_id = event["order_id"], event["customer_id"]
        except (ValueError, TypeError, KeyError):
            return None
        if not isinstance(order_id, str) or not 0 < len(order_id) <= 32 or type(customer_id) is not int:
            return None
        return cls(order_id, customer_id)


@dataclass(frozen=True)
class LoyaltyConsumer:
    """The handler of the ``loyalty`` queue: one point per order-paid message id, whatever the deliveries."""

    name: str = LOYALTY
    first_time: Callable[[str, str], bool] = first_delivery  # the inbox (the lab's twin swaps it)

    def __call__(self, delivery: Delivery) -> str:
        try:
            return self._award(delivery)
        except IntegrityError:  # a customer the shop does not know: it would fail on every redelivery, and block
            with writing():  # the queue behind it (prefetch 1); rejected, and noted
                note_delivery(self.name, delivery, REJECTED)
            return REJECTED

    def _award(self, delivery: Delivery) -> str:
        paid = PaidOrder.of(delivery)
        usable = paid is not None and 0 < len(delivery.message_id) <= MAX_MESSAGE_ID
        with writing():
            if paid is None or not usable:
                note_delivery(self.name, delivery, REJECTED)
                return REJECTED  # no inbox can tell a copy of a message without an id: dropped, and noted here
            outcome = DUPLICATE
            if self.first_time(self.name, delivery.message_id):
                db.session.add(
                    LoyaltyPoint(
                        consumer=self.name,
                        customer_id=paid.customer_id,
                        order_id=paid.order_id,
                        message_id=delivery.message_id,
                        awarded_at=utcnow(),
                    )
                )
                outcome = HANDLED
            note_delivery(self.name, delivery, outcome)
        return outcome


def points_of(customer_id: int, consumer: str = LOYALTY) -> int:
    return int(
        db.session.scalar(
            sa.select(sa.func.count())
            .select_from(LoyaltyPoint)
            .where(LoyaltyPoint.consumer == consumer, LoyaltyPoint.customer_id == customer_id)
        )
        or 0
    )


def register(app: Flask) -> None:
    register_consumer(app, LOYALTY, (ORDER_PAID,), LoyaltyConsumer())
