"""The customer's orders, in the browser. Nobody sees another customer's.

A pending order whose payment nobody is working on (the gateway was down, or
its answer was lost, and the shopper moved on) offers to finish that payment:
the form carries the payment's own key, so finishing it is a retry, never a
second payment.
"""

from __future__ import annotations

import sqlalchemy as sa
from flask import Blueprint, abort, render_template, session
from flask.typing import ResponseReturnValue

from checkout.extensions import db
from checkout.idempotency import Scope, peek
from checkout.shop.forms import CheckoutForm
from checkout.shop.identity import known_browser_customer_id
from checkout.shop.models import PENDING, Order
from checkout.shop.responders import BROWSER_ENDPOINT

bp = Blueprint("orders", __name__)

REPLAYED = "replayed_orders"
REMEMBERED_REPLAYS = 10


def remember_replay(order_url: str) -> None:
    """Note in the session that Pay was pressed more than once for this order.

    A replay redirects to the same order URL as the original; the order page
    reads this note to say "already placed and charged once". In a double
    submit both answers carry the note, so whichever one the browser shows
    (and whichever cookie it keeps last) says so.
    """
    order_id = order_url.rstrip("/").rsplit("/", 1)[-1]
    replayed = [o for o in session.get(REPLAYED, []) if o != order_id]
    session[REPLAYED] = [*replayed, order_id][-REMEMBERED_REPLAYS:]


def orders_of(customer_id: int, idempotency_key: str | None = None) -> list[Order]:
    query = sa.select(Order).where(Order.customer_id == customer_id)
    if idempotency_key is not None:
        query = query.where(Order.idempotency_key == idempotency_key)
    return list(db.session.scalars(query.order_by(Order.created_at.desc(), Order.id.desc())))


def order_of(customer_id: int, order_id: str) -> Order | None:
    return db.session.scalars(
        sa.select(Order).where(Order.public_id == order_id, Order.customer_id == customer_id)
    ).first()


@bp.get("/orders", endpoint="index")
def index() -> ResponseReturnValue:
    customer_id = known_browser_customer_id()
    return render_template("shop/orders.html", orders=orders_of(customer_id) if customer_id else [])


def _finish_form(order: Order) -> CheckoutForm | None:
    """The form that finishes this order's payment, if it is unfinished and nobody is working on it."""
    if order.status != PENDING or order.idempotency_key is None or order.cart_version is None:
        return None
    view = peek(Scope(order.customer.public_id, BROWSER_ENDPOINT, order.idempotency_key))
    if view is None or view.completed or view.lease_live:
        return None
    return CheckoutForm(
        formdata=None,
        email=order.email,
        idempotency_key=order.idempotency_key,
        cart_version=str(order.cart_version),
        expected_total=str(order.total_cents),
    )


@bp.get("/orders/<order_id>", endpoint="show")
def show(order_id: str) -> ResponseReturnValue:
    customer_id = known_browser_customer_id()
    order = order_of(customer_id, order_id) if customer_id else None
    if order is None:
        abort(404)
    return render_template(
        "shop/order.html",
        order=order,
        replayed=order_id in session.get(REPLAYED, []),
        finish_form=_finish_form(order),
    )
