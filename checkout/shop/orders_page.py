"""The customer's orders, in the browser. Nobody sees another customer's."""
from __future__ import annotations

import sqlalchemy as sa
from flask import Blueprint, abort, render_template, request

from checkout.extensions import db
from checkout.shop.identity import known_browser_customer
from checkout.shop.models import Order

bp = Blueprint("orders", __name__)


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
    return render_template("shop/order.html", order=order, replayed=request.args.get("replayed") == "1")
