"""The unsafe checkout: the bug the rest of the project prevents.

DELIBERATELY WRONG, for the workshop. Compare with
``checkout/shop/checkout_page.py`` and ``checkout/shop/placement.py``:

- no idempotency key in the form, so two submits look like two payments;
- no claim, no stored response: every POST does the whole job again;
- no unique constraint to lean on (its orders have no key);
- a new gateway key for every attempt, so the gateway charges every time;
- no button guard: the page loads no JavaScript.

A double-click here makes two orders and two charges.
"""

from __future__ import annotations

import json
import secrets

import sqlalchemy as sa
from flask import Blueprint, Response, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from wtforms import HiddenField

from checkout.database import utcnow
from checkout.extensions import csrf_exempt
from checkout.gateway import CardDeclined, GatewayError
from checkout.i18n import _
from checkout.lab import lab_only
from checkout.problems import json_bytes, problem
from checkout.shop import carts, emails, parsing, stock
from checkout.shop.carts import purchase_of
from checkout.shop.forms import PaymentForm
from checkout.shop.identity import api_customer, browser_customer_id
from checkout.shop.lines import Line
from checkout.shop.models import (
    DECLINED,
    PAID,
    PARTIALLY_REFUNDED,
    REFUND_PENDING,
    REFUNDABLE,
    REFUNDED,
    UNSAFE_PATH,
    Cart,
    CartLine,
    Order,
    OrderItem,
    Refund,
    public_id,
)
from checkout.shop.orders import refund_by_public_id, view_of
from checkout.shop.orders_page import order_of
from checkout.shop.refunds import mark_refunded
from checkout.shop.runtime import gateway
from checkout.shop.validation import validate_order
from checkout.transactions import writing

bp = lab_only(Blueprint("unsafe", __name__))


class UnsafeCheckoutForm(PaymentForm):
    """The checkout form's fields without the key and the cart version. The purchase field only
    labels the purchase for the lab's accounting (two submits of one page are one purchase)."""

    purchase = HiddenField()


def _render(
    form: UnsafeCheckoutForm, status: int = 200, error: str | None = None, headers: dict[str, str] | None = None
) -> ResponseReturnValue:
    cart = carts.current()
    lines = cart.lines() if cart else ()
    form.card_number.data = ""  # even here, a card number is never echoed into a page
    return (
        render_template(
            "lab/unsafe_checkout.html",
            form=form,
            lines=lines,
            error=error,
            total_cents=sum(line.total_cents for line in lines),
        ),
        status,
        headers or {},
    )


@bp.get("/lab/unsafe-checkout")
def show() -> ResponseReturnValue:
    cart = carts.current()
    if cart is None or cart.empty:
        return redirect(url_for("shop.cart"))
    return _render(UnsafeCheckoutForm(formdata=None, purchase=purchase_of(cart.public_id, cart.version)))


def place_unsafely(
    customer_id: int, lines: tuple[Line, ...], email: str, card_number: str, purchase_ref: str | None
) -> Order:
    """THE BUG: every call is a new order, charged under a new gateway key.

    Raises GatewayError (after saving the order) when the gateway fails: there
    is nothing to resume, so pressing Pay again starts a brand-new payment.
    """
    order_id = public_id("ord")
    with writing() as tx:
        if stock.take(lines):
            raise OutOfStock()
        order = Order(
            public_id=order_id,
            customer_id=customer_id,
            idempotency_key=None,
            path=UNSAFE_PATH,
            purchase_ref=purchase_ref,  # for the lab's accounting only: nothing here looks at it
            gateway_key=f"unsafe-{secrets.token_hex(8)}",  # THE BUG, downstream: a new key on every attempt
            email=email,
            card_last4=card_number[-4:],
            total_cents=sum(line.total_cents for line in lines),
            currency="USD",
            items=[
                OrderItem(sku=line.sku, name=line.name, quantity=line.quantity, unit_price_cents=line.unit_price_cents)
                for line in lines
            ],
        )
        tx.add(order)
    status, charge_id = PAID, None
    try:
        charge = gateway().charge(
            gateway_key=order.gateway_key,
            amount_cents=order.total_cents,
            currency=order.currency,
            card_number=card_number,
            reference=order.public_id,
        )
        charge_id = charge.id
    except CardDeclined as declined:
        status, charge_id = DECLINED, declined.charge.id
    with writing() as tx:
        tx.execute(sa.update(Order).where(Order.id == order.id).values(status=status, charge_id=charge_id))
        tx.refresh(order)
        if status == PAID:
            emails.order_confirmation(view_of(order))  # a new order each time: a new email each time
        else:
            stock.give_back_order(order.id)
    return order


class OutOfStock(Exception):
    pass


def _empty_cart(cart_id: int) -> None:
    with writing() as tx:
        tx.execute(sa.delete(CartLine).where(CartLine.cart_id == cart_id))
        tx.execute(sa.update(Cart).where(Cart.id == cart_id).values(version=Cart.version + 1))


@bp.post("/lab/unsafe-checkout")
def pay() -> ResponseReturnValue:
    form = UnsafeCheckoutForm()
    if not form.validate():
        return _render(form, 422)
    cart = carts.current()
    if cart is None or cart.empty:
        return redirect(url_for("shop.cart"), 303)
    with writing():
        customer_id = browser_customer_id()
    try:
        purchase = form.purchase.data if parsing.is_purchase(form.purchase.data) else None
        order = place_unsafely(customer_id, cart.lines(), form.normalized_email(), form.card_digits(), purchase)
    except OutOfStock:
        return _render(form, 422, error=_("Sold out. (Even the unsafe checkout cannot sell what it does not have.)"))
    except GatewayError:
        return _render(
            form,
            503,
            error=_(
                "The gateway failed. (The unsafe checkout has no way to resume: "
                "pressing Pay again starts a brand-new payment.)"
            ),
            headers={"Retry-After": "1"},  # every 503 says when; the unsafe twin, on purpose, charges anew
        )
    _empty_cart(cart.id)
    return redirect(url_for("orders.show", order_id=order.public_id), 303)


@bp.post("/api/lab/unsafe-orders")
@csrf_exempt
def api_pay() -> Response:
    """The unsafe twin of POST /api/orders, for the mass test: no Idempotency-Key at all."""
    customer = api_customer()
    if customer is None:
        return problem(401, "Unauthorized", "Send Authorization: Bearer <token>.")
    try:
        body = json.loads(request.get_data(cache=False))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return problem(400, "Malformed JSON", "The body is not valid JSON.")
    valid, errors = validate_order(body)
    if valid is None:
        return problem(422, "Invalid order", "Some fields are invalid.", errors=errors)
    try:
        order = place_unsafely(customer.id, valid.lines, valid.email, valid.card_number, valid.order.purchase)
    except OutOfStock:
        return problem(422, "Out of stock", "Not enough stock.", type_="out-of-stock")
    except GatewayError as error:
        return problem(503, "Gateway failed", str(error), headers={"Retry-After": "1"})
    if order.status != PAID:
        return problem(402, "Card declined", "The card was declined.", type_="card-declined")
    return Response(json_bytes(view_of(order).to_json()), status=201, mimetype="application/json")


@bp.post("/api/lab/unsafe-orders/<order_id>/refunds")
@csrf_exempt
def api_refund(order_id: str) -> Response:
    """The unsafe twin of POST /api/orders/<id>/refunds: no key, so every retry is one more refund.

    It still cannot refund more than was charged: the order's conditional
    UPDATE and the gateway's CHECK refuse that. What it loses is "once".
    """
    customer = api_customer()
    if customer is None:
        return problem(401, "Unauthorized", "Send Authorization: Bearer <token>.")
    order = order_of(customer.id, order_id)
    if order is None:
        return problem(404, "Not found", "No such order for this customer.")
    try:
        raw = request.get_json(silent=True) or {}
        amount = parsing.amount_cents(raw.get("amount_cents") if isinstance(raw, dict) else None)
    except parsing.Invalid as error:
        return problem(422, "Invalid refund", str(error))
    view = view_of(order)
    amount = amount if amount is not None else view.total_cents - view.refunded_cents
    refund_id = public_id("re")
    refund_key = f"unsafe-refund-{secrets.token_hex(8)}"  # THE BUG: a new gateway key on every attempt
    with writing() as tx:
        reserved = tx.execute(
            sa.update(Order)
            .where(
                Order.id == order.id,
                Order.status.in_(REFUNDABLE),
                Order.refunded_cents + amount <= Order.total_cents,
                sa.literal(amount) > 0,
            )
            .values(
                refunded_cents=Order.refunded_cents + amount,
                status=sa.case(
                    (Order.refunded_cents + amount == Order.total_cents, REFUNDED), else_=PARTIALLY_REFUNDED
                ),
            )
            .returning(Order.id)
        ).first()
        if reserved is not None:
            tx.add(
                Refund(
                    public_id=refund_id,
                    order_id=order.id,
                    idempotency_key=None,
                    refund_key=refund_key,
                    amount_cents=amount,
                    currency=view.currency,
                    reason="",
                    status=REFUND_PENDING,
                    path=UNSAFE_PATH,
                    created_at=utcnow(),
                    updated_at=utcnow(),
                )
            )
    if reserved is None:
        return problem(422, "Refund exceeds charge", "Not that much is left to refund.", type_="refund-exceeds-charge")
    try:
        gateway_refund = gateway().refund(
            refund_key=refund_key, charge_id=str(view.charge_id), amount_cents=amount, currency=view.currency
        )
    except GatewayError as error:
        return problem(503, "Gateway failed", str(error), headers={"Retry-After": "1"})
    with writing():
        refund = refund_by_public_id(refund_id)
        assert refund is not None
        mark_refunded(refund, gateway_refund.id)
    done = refund_by_public_id(refund_id)
    assert done is not None
    return Response(json_bytes(done.to_json()), status=201, mimetype="application/json")
