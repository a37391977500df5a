"""The customer's orders, in the browser. Nobody sees another customer's."""

from __future__ import annotations

import sqlalchemy as sa
from flask import Blueprint, abort, render_template, session

from checkout.extensions import db
from checkout.shop.identity import known_browser_customer
from checkout.shop.models import Order

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


def orders_of(customer_id: int) -> list[Order]:
    orders = db.session.scalars(
        sa.select(Order).where(Order.customer_id == customer_id).order_by(Order.created_at.desc(), Order.id.desc())
    ).all()
    db.session.commit()
    return list(orders)


def order_of(customer_id: int, order_id: str) -> Order | None:
    order = db.session.scalars(
        sa.select(Order).where(Order.public_id == order_id, Order.customer_id == customer_id)
    ).first()
    db.session.commit()
    return order


@bp.get("/orders", endpoint="index")
def index() -> str:
    customer = known_browser_customer()
    return render_template("shop/orders.html", orders=orders_of(customer.id) if customer else [])


@bp.get("/orders/<order_id>", endpoint="show")
def show(order_id: str) -> str:
    customer = known_browser_customer()
    order = order_of(customer.id, order_id) if customer else None
    if order is None:
        abort(404)
    return render_template("shop/order.html", order=order, replayed=order_id in session.get(REPLAYED, []))
