"""Finish operations nobody is working on any more, by asking the gateway.

A worker died mid-payment, or a client got a 503 and never came back. For
each such record we take the lease over (the same compare-and-set a retry
uses), find the order its key created, and ask the gateway by the order's
gateway key what really happened:

- a succeeded charge: the order is paid; the stored answer is the success;
- a declined charge: the order is declined; the stored answer is the decline;
- no charge: the order is ended as ``failed`` (nothing was charged) and the
  stored answer says so;
- no order yet (the worker died before creating it): the record is deleted,
  so the client's next retry starts afresh; nothing happened.

The client sees the outcome on its next retry with the same key.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from checkout.extensions import db
from checkout.gateway import Gateway
from checkout.idempotency import LeaseLost, Settings, abandoned, take_over
from checkout.shop.models import DECLINED, FAILED, Customer
from checkout.shop.placement import answer_for, find_order, finish_paid
from checkout.shop.responders import RESPONDERS


@dataclass(frozen=True)
class Reconciled:
    key: str
    endpoint: str
    customer: str
    outcome: str  # paid, declined, failed, restarted, skipped
    order_id: str | None = None
    charge_id: str | None = None

    def __str__(self) -> str:
        parts = [f"{self.outcome:<9}", self.endpoint, f"key={self.key}", f"customer={self.customer}"]
        if self.order_id:
            parts.append(f"order={self.order_id}")
        if self.charge_id:
            parts.append(f"charge={self.charge_id}")
        return " ".join(parts)


def reconcile(gateway: Gateway, settings: Settings) -> list[Reconciled]:
    results = []
    for record in abandoned(settings):
        summary = Reconciled(record.key, record.endpoint, record.customer, "skipped")
        respond = RESPONDERS.get(record.endpoint)
        operation = take_over(record, settings, by="reconcile_started") if respond else None
        if operation is None or respond is None:
            results.append(summary)  # an endpoint we do not know, or a retry got there first
            continue
        try:
            customer_id = db.session.scalar(sa.select(Customer.id).where(Customer.public_id == record.customer))
            order = find_order(customer_id, record.key) if customer_id is not None else None
            db.session.commit()
            if order is None:
                operation.discard("abandoned before an order existed")
                results.append(Reconciled(record.key, record.endpoint, record.customer, "restarted"))
                continue
            charge = gateway.retrieve(order.gateway_key)
            if charge is not None and charge.succeeded:
                finish_paid(operation, order, charge, respond)
                outcome = "paid"
            else:
                with operation.phase():
                    order.status = DECLINED if charge is not None else FAILED
                    order.charge_id = charge.id if charge is not None else None
                    operation.note("reconciled", order_id=order.public_id, status=order.status)
                    operation.complete(answer_for(order, respond))
                outcome = order.status
            results.append(
                Reconciled(record.key, record.endpoint, record.customer, outcome, order.public_id, order.charge_id)
            )
        except LeaseLost:
            db.session.rollback()
            results.append(summary)  # a client's retry took it over meanwhile: it will finish it
    return results
