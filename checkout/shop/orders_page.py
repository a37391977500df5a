"""The customer's orders, in the browser. Nobody sees another customer's.

A pending order nobody is paying offers to finish it under the payment's own key (a retry, never a second payment);
a refund form has a key of its own, so a double submit refunds once.
Design: docs/design.md#checkoutshoporders_pagepy-the-customers-orders
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, abort, flash, redirect, render_template, session, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _

from checkout.config import settings
from checkout.extensions import db, once
from checkout.i18n import format_money
from checkout.idempotency import (
    Done,
    InProgress,
    InvalidKey,
    Mismatch,
    Outcome,
    Pipeline,
    Refused,
    Unfinished,
    parse_key,
)
from checkout.shop import schemas
from checkout.shop.forms import CheckoutForm, RefundForm
from checkout.shop.identity import browser_identity, known_browser_customer_id
from checkout.shop.models import PENDING, REFUNDABLE, Order
from checkout.shop.orders import refunds, refunds_where
from checkout.shop.payment import BROWSER, gateway
from checkout.shop.refunds import BROWSER_REFUNDS, BrowserRefundResponder, PlaceRefund, RefundRequest

bp = Blueprint("orders", __name__)

REPLAYED = "replayed_orders"
REFUND_REPLAYED = "replayed_refunds"
REMEMBERED_REPLAYS = 10


def remember_replay(order_url: str) -> None:
    """Note in the session that Pay was pressed more than once for this order.

    A replay redirects to the same order URL as the original; the order page reads this note to say "already placed
    and charged once". In a double submit both answers carry the note, so whichever one the browser shows (and
    whichever cookie it keeps last) says so.
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
    if order.status != PENDING or order.cart_version is None:
        return None
    view = once.peek(BROWSER, order.idempotency_key, order.customer.public_id)
    if view is None or view.completed or view.lease_live:
        return None
    return CheckoutForm(
        formdata=None,
        email=order.email,
        idempotency_key=order.idempotency_key,
        cart_version=str(order.cart_version),
        expected_total=str(order.total_cents),
    )


def _refund_form(order: Order, form: RefundForm | None = None) -> RefundForm | None:
    """The refund form for a paid order with money left to refund; a new key for each page."""
    if order.status not in REFUNDABLE or order.charge_id is None or order.refunded_cents >= order.total_cents:
        return None
    form = form or RefundForm(formdata=None)
    form.idempotency_key.data = form.idempotency_key.data or str(uuid.uuid4())
    return form


def _render_order(
    order: Order,
    status: int = 200,
    *,
    refund_form: RefundForm | None = None,
    error: str | None = None,
    headers: dict[str, str] | None = None,
) -> ResponseReturnValue:
    return (
        render_template(
            "shop/order.html",
            order=order,
            refunds=refunds_where(refunds.c.order_id == order.id),
            replayed=order.public_id in session.get(REPLAYED, []),
            refund_replayed=order.public_id in session.pop(REFUND_REPLAYED, []),
            finish_form=_finish_form(order),
            refund_form=_refund_form(order, refund_form),
            refund_error=error,
        ),
        status,
        headers or {},
    )


def _own_order(order_id: str) -> Order:
    """This browser's order, or a 404 (another shopper's order is not there, for this one)."""
    customer_id = known_browser_customer_id()
    order = order_of(customer_id, order_id) if customer_id else None
    if order is None:
        abort(404)
    return order


@bp.get("/orders/<order_id>", endpoint="show")
def show(order_id: str) -> ResponseReturnValue:
    return _render_order(_own_order(order_id))


@bp.post("/orders/<order_id>/refunds", endpoint="refund")
def refund(order_id: str) -> ResponseReturnValue:
    order = _own_order(order_id)
    form = RefundForm()
    try:
        key = parse_key(form.idempotency_key.data)
    except InvalidKey:
        return _render_order(order, 400, error=_("This refund form has no key: reload the page. Nothing was refunded."))
    if not form.validate():
        return _render_order(order, 422, refund_form=form)
    amount = schemas.clean_dollars(form.amount.data)
    return once.respond(
        REFUNDING,
        PlaceRefund(
            RefundRequest(order.customer_id, order_id, key, amount, ""), BrowserRefundResponder(), gateway(), REFUNDING
        ).phases(),
        key=key,
        body={"order_id": order_id, "amount_cents": amount},
        customer=browser_identity(),
        answers=RefundPage(order, form),
        wait=settings().browser_wait_seconds,
    )


REFUNDING = Pipeline(BROWSER_REFUNDS)


@dataclass(frozen=True)
class RefundPage:
    """The order page, in place of the API's JSON, for each outcome of the refund form."""

    order: Order
    form: RefundForm

    def answer(self, outcome: Outcome, key: str) -> ResponseReturnValue:
        return _refund_answer(outcome, self.order, self.form)


def _refund_answer(outcome: Outcome, order: Order, form: RefundForm) -> ResponseReturnValue:
    match outcome:
        case Done(response=stored, replayed=replayed, duplicates=duplicates):
            return _refund_page_for(json.loads(stored.body), order, pressed_again=replayed or duplicates > 0)
        case Refused(response=stored):
            return _refund_page_for(json.loads(stored.body), order, pressed_again=False)
        case InProgress():
            flash(_("Your refund is still being processed; this page shows it once it is done."), "info")
            return redirect(url_for("orders.show", order_id=order.public_id), 303)
        case Mismatch():
            return _render_order(
                order,
                422,
                error=_(
                    "This refund form was already sent with another amount. Nothing new "
                    "was refunded: reload the page to refund again."
                ),
            )
        case Unfinished(reason=reason, retry_after=retry_after):
            return _render_order(
                order,
                503,
                refund_form=form,
                headers={"Retry-After": str(retry_after)},
                error=_(
                    "We could not confirm the refund yet: %(reason)s. "
                    "Press Refund again: it finishes this same refund and never refunds twice.",
                    reason=_(reason),
                ),
            )
    raise AssertionError(f"unknown outcome {outcome!r}")


def _refund_page_for(answer: dict[str, Any], order: Order, pressed_again: bool) -> ResponseReturnValue:
    """The page for a stored refund answer: the order with the refund, or the order again with why not."""
    if answer["outcome"] == "refunded":
        if pressed_again:
            session[REFUND_REPLAYED] = [*session.get(REFUND_REPLAYED, []), order.public_id][-REMEMBERED_REPLAYS:]
        flash(
            _(
                "Refunded %(amount)s (refund %(refund)s).",
                amount=format_money(answer["amount_cents"], order.currency),
                refund=answer["refund_id"],
            ),
            "success",
        )
        return redirect(url_for("orders.show", order_id=order.public_id), 303)
    fresh = order_of(order.customer_id, order.public_id) or order
    if answer["outcome"] == "exceeds":
        left = format_money(answer["left_cents"], order.currency)
        return _render_order(
            fresh, 422, error=_("That is more than is left to refund (%(left)s). Nothing was refunded.", left=left)
        )
    return _render_order(fresh, 422, error=_("This order cannot be refunded. Nothing was refunded."))
