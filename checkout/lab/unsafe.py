"""The unsafe checkout: the bug the rest of the project prevents.

DELIBERATELY WRONG, for the workshop: the shop's own payment with no store
(``UNSAFE``: checkout/lab/mistakes/twin.py), so nothing tells a retry from a
new payment. The form carries no key, the page loads no JavaScript (no button
guard), and each order gets its own key, so the orders' unique (customer,
key) cannot catch it either. A double-click here makes two orders and two
charges. Its API twins: ``POST /api/lab/unsafe-orders`` and its refunds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flask import Blueprint, Response, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from wtforms import HiddenField

from checkout.database import writing
from checkout.extensions import csrf_exempt, once
from checkout.i18n import _
from checkout.idempotency import NO_STORE, Done, Outcome, Refused
from checkout.lab import lab_only
from checkout.lab.mistakes.twin import a_new_key_per_request, twin
from checkout.lab.tables import name_the_purchase, purchase_of, variant
from checkout.shop import carts
from checkout.shop.answers import BrowserOutcome, BrowserResponder
from checkout.shop.api import REFUNDS, place_order, refund_order, token_required
from checkout.shop.forms import PaymentForm
from checkout.shop.identity import browser_customer_id, browser_identity
from checkout.shop.payment import OrderRequest, PlaceOrder
from checkout.shop.schemas import RequestedLine

bp = lab_only(Blueprint("unsafe", __name__))

# The shop's payment with no store: the one part this checkout swaps.
UNSAFE_PATH = "unsafe"
UNSAFE = variant(twin("unsafe", store=NO_STORE), UNSAFE_PATH, endpoint="POST /api/lab/unsafe-orders")
UNSAFE_CHECKOUT = replace(UNSAFE, endpoint="POST /lab/unsafe-checkout")
UNSAFE_REFUNDS = variant(
    REFUNDS,
    UNSAFE_PATH,
    endpoint="POST /api/lab/unsafe-orders/<order_id>/refunds",
    store=NO_STORE,
    order_key_of=a_new_key_per_request,
)


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
    request = OrderRequest(
        customer_id=customer_id,
        idempotency_key="",
        email=form.normalized_email(),
        card_number=form.card_digits(),
        items=tuple(RequestedLine(i, line.sku, line.quantity) for i, line in enumerate(cart.lines())),
    )
    name_the_purchase(form.purchase.data or None)
    phases = PlaceOrder(request, BrowserResponder(), UNSAFE_CHECKOUT).phases()
    answers = UnsafePage(form, cart.id, cart.version)
    return once.respond(UNSAFE_CHECKOUT, phases, key="", body={}, customer=browser_identity(), answers=answers)


@dataclass(frozen=True)
class UnsafePage:
    """What the unsafe checkout shows for the outcome: the order, or the form again (never a resumption)."""

    form: UnsafeCheckoutForm
    cart_id: int
    version: int

    def answer(self, outcome: Outcome, key: str) -> ResponseReturnValue:
        return _answer(outcome, self.form, self.cart_id, self.version)


def _answer(outcome: Outcome, form: UnsafeCheckoutForm, cart_id: int, version: int) -> ResponseReturnValue:
    if not isinstance(outcome, Done | Refused):
        return _render(
            form,
            503,
            error=_(
                "The gateway failed. (The unsafe checkout has no way to resume: "
                "pressing Pay again starts a brand-new payment.)"
            ),
            headers={"Retry-After": "1"},  # every 503 says when; the unsafe twin, on purpose, charges anew
        )
    said = BrowserOutcome.from_stored(outcome.response)
    if said.order_url is None:  # out of stock, or a line no longer sold
        return _render(form, 422, error=_("Sold out. (Even the unsafe checkout cannot sell what it does not have.)"))
    with writing():
        carts.close_paid_version(cart_id, version)
    return redirect(said.order_url, 303)


@bp.post("/api/lab/unsafe-orders")
@csrf_exempt
@token_required
def api_pay() -> Response:
    """The unsafe twin of POST /api/orders, for the mass test: no Idempotency-Key at all."""
    return place_order(UNSAFE)


@bp.post("/api/lab/unsafe-orders/<order_id>/refunds")
@csrf_exempt
@token_required
def api_refund(order_id: str) -> Response:
    """The unsafe twin of POST /api/orders/<id>/refunds: no key, so every retry is one more refund.

    It still cannot refund more than was charged: the order's conditional
    UPDATE and the gateway's CHECK refuse that. What it loses is "once".
    """
    return refund_order(order_id, UNSAFE_REFUNDS)
