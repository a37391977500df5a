"""Compensation in the lab (on ``/lab/reconciliation``): an orphan charge staged, then refunded once.

"Stage a late charge" leaves what a stalled worker leaves behind on a gateway without keys: its order ended failed
(as reconcile ends one whose key it fenced with nothing under it), then the charge that worker makes when it wakes,
through the legacy interface. "Compensate now" does what reconcile's last step and
``flask --app checkout gateway compensate`` do (checkout/shop/compensation.py).
Design: docs/lab.md#checkoutlabcompensationpy-an-orphan-charge-refunded-once
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from flask import Blueprint, flash, redirect, url_for
from flask.typing import ResponseReturnValue

from checkout.database import public_id, writing
from checkout.extensions import db
from checkout.gateway import GatewayError
from checkout.i18n import _
from checkout.lab import lab_only
from checkout.lab.legacy import LEGACY, legacy_gateway
from checkout.shop import orders
from checkout.shop.compensation import REFUNDED, compensate_all
from checkout.shop.models import FAILED, Customer
from checkout.shop.payment import end_order, gateway, gateway_key_for
from checkout.shop.schemas import RequestedLine

bp = lab_only(Blueprint("compensation", __name__))

GOOD_CARD = "4242424242424242"
STAGED_BY = "cus_demo_alice"


def stage_late_charge() -> str:
    """An order that ended failed, then a charge for it through the legacy gateway; the order's id."""
    with writing():
        customer_id = db.session.scalar(sa.select(Customer.id).where(Customer.public_id == STAGED_BY))
        priced, _errors = orders.price([RequestedLine(0, "MUG-01", 1)], customer_id)
        if customer_id is None or priced is None or orders.take_stock(priced.lines):
            raise LookupError("alice, or a mug in stock, is missing: run flask --app checkout seed")
        order_id = public_id("ord")
        order = orders.insert(
            {
                "public_id": order_id,
                "gateway_key": gateway_key_for(order_id),
                "customer_id": customer_id,
                "idempotency_key": f"lab-late-charge-{uuid.uuid4()}",
                "cart_id": None,
                "cart_version": None,
                "email": "alice@example.com",
                "card_last4": GOOD_CARD[-4:],
                "total_cents": orders.total_of(priced.lines),
                "currency": priced.currency,
            },
            priced.lines,
        )
        assert order is not None  # a new key: nothing can be there before it
        orders.tell(orders.order_placed, pipeline=LEGACY, order_id=order.id)
        end_order(order, FAILED, None)  # reconcile's ending: its stock goes back, nothing was charged
    legacy_gateway().charge(
        amount_cents=order.total_cents, currency=order.currency, card_number=GOOD_CARD, reference=order.public_id
    )
    return order.public_id


@bp.post("/lab/compensation/stage")
def stage() -> ResponseReturnValue:
    try:
        order_id = stage_late_charge()
    except (LookupError, GatewayError) as error:
        flash(str(error), "error")
    else:
        flash(_("Order %(order)s ended failed, and a late charge landed for it.", order=order_id), "success")
    return redirect(url_for("legacy_gateway.reconciliation", _anchor="compensation"), 303)


@bp.post("/lab/compensation/run")
def run() -> ResponseReturnValue:
    done = compensate_all(gateway())
    refunded = sum(compensated.outcome == REFUNDED for compensated in done)
    flash(_("Compensated %(count)d orphan charge(s).", count=refunded), "success" if done else "info")
    for compensated in done:
        if compensated.outcome != REFUNDED:
            flash(str(compensated), "error")
    return redirect(url_for("legacy_gateway.reconciliation", _anchor="compensation"), 303)
