"""The browser checkout: the form with its idempotency key, and POST /checkout.

The server alone prevents the duplicate; the hidden key and the disabled
button only make it rarer and the experience kinder.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from flask import Blueprint, abort, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _

from checkout.config import settings
from checkout.database import writing
from checkout.extensions import db, once
from checkout.gateway.cards import TEST_CARDS, pretty
from checkout.idempotency import Done, InProgress, InvalidKey, Mismatch, Outcome, Refused, Unfinished, parse_key
from checkout.shop import carts
from checkout.shop.answers import BrowserOutcome, BrowserResponder
from checkout.shop.carts import CartView
from checkout.shop.forms import CheckoutForm
from checkout.shop.identity import browser_customer_id, browser_identity, known_browser_customer_id
from checkout.shop.models import PENDING, WAS_PAID, Order, Product
from checkout.shop.orders import Line
from checkout.shop.orders_page import remember_replay
from checkout.shop.payment import BROWSER, CartVersion, OrderRequest, PlaceOrder, find_order

bp = Blueprint("checkout", __name__)

CURRENCY = "USD"
# How often the "still processing" page looks again (its text says "every second"). At most 1 s: Chromium and
# WebKit then replace the page in the history; longer, it stays there, and Back from the order asks to resend.
LOOK_AGAIN_SECONDS = 1


@dataclass(frozen=True)
class Page:
    """What the checkout page shows: the lines being paid, the form's hidden values, and notices."""

    lines: tuple[Line, ...]
    key: str
    version: int
    paid_url: str | None = None
    email: str | None = None  # the paid order's: pressing Pay again must be the same payment


def _earlier_payments(cart: CartView) -> list[Order]:
    """Earlier versions of this cart whose payment is unconfirmed, or went through after the cart had
    changed (until the cart is paid again): the shopper may not know, and must never pay twice unaware."""
    orders = db.session.scalars(
        sa.select(Order)
        .where(Order.cart_id == cart.id, Order.cart_version < cart.version, Order.status.in_((PENDING, *WAS_PAID)))
        .order_by(Order.cart_version.desc())
    ).all()
    last_settled = max(
        (o.cart_version or 0 for o in orders if o.status in WAS_PAID and not o.cart_moved_on), default=-1
    )
    return [o for o in orders if o.status == PENDING or (o.cart_moved_on and (o.cart_version or 0) > last_settled)][:3]


def _paid_order(cart: CartView, version: int) -> Order | None:
    """The paid order of one version of the cart: the orders' unique (cart, version) allows only one."""
    return db.session.scalars(
        sa.select(Order).where(Order.cart_id == cart.id, Order.cart_version == version, Order.status.in_(WAS_PAID))
    ).first()


def _last_paid_page(cart: CartView | None) -> Page | None:
    """The cart is empty because its last version was paid: show that payment (its answer may have been lost)."""
    if cart is None or not cart.empty or cart.version == 0:
        return None
    order = _paid_order(cart, cart.version - 1)
    key = carts.version_key(cart.id, cart.version - 1)
    if order is None or key is None or order.idempotency_key != key:
        return None
    lines = tuple(Line(i.sku, i.name, i.quantity, i.unit_price_cents) for i in order.items)
    return Page(lines, key, cart.version - 1, url_for("orders.show", order_id=order.public_id), order.email)


def _render(
    form: CheckoutForm,
    page: Page,
    status: int = 200,
    *,
    error: str | None = None,
    earlier: list[Order] | None = None,
    headers: dict[str, str] | None = None,
) -> ResponseReturnValue:
    form.idempotency_key.data = page.key
    form.cart_version.data = str(page.version)
    form.expected_total.data = str(sum(line.total_cents for line in page.lines))
    form.card_number.data = ""  # a card number is never echoed into a page
    if page.email and not form.email.data:
        form.email.data = page.email
    return (
        render_template(
            "shop/checkout.html",
            form=form,
            lines=page.lines,
            total_cents=sum(line.total_cents for line in page.lines),
            currency=CURRENCY,
            error=error,
            paid_url=page.paid_url,
            earlier=earlier or [],
            # Production shows no test cards (the fault cards are a workshop's tool, not a shopper's).
            test_cards=[]
            if settings().env == "production"
            else [(pretty(number), text) for number, (_b, text) in TEST_CARDS.items()],
        ),
        status,
        headers or {},
    )


def _current_page(cart: CartView) -> Page:
    return Page(cart.lines(), carts.key_for(cart), cart.version)


@bp.get("/checkout")
def show() -> ResponseReturnValue:
    cart = carts.current()
    if cart is None or cart.empty:
        paid = _last_paid_page(cart)
        if paid is None:
            return redirect(url_for("shop.cart"))
        return _render(CheckoutForm(formdata=None), paid)
    return _render(CheckoutForm(formdata=None), _current_page(cart), earlier=_earlier_payments(cart))


def _rerender(form: CheckoutForm, status: int, error: str | None = None) -> ResponseReturnValue:
    """The checkout again, for the cart as it is now (a new key if its version moved on)."""
    cart = carts.current()
    if cart is None or cart.empty:
        paid = _last_paid_page(cart)
        if paid is None:
            return redirect(url_for("shop.cart"), 303)
        return _render(form, paid, status, error=error)
    return _render(form, _current_page(cart), status, error=error, earlier=_earlier_payments(cart))


def _out_of_date(reason: str | None = None) -> ResponseReturnValue:
    return render_template("shop/out_of_date.html", reason=reason), 422


def _int(raw: str | None) -> int | None:
    text = (raw or "").strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


@bp.post("/checkout")
def pay() -> ResponseReturnValue:
    form = CheckoutForm()
    try:
        key = parse_key(form.idempotency_key.data)
    except InvalidKey:
        return render_template(
            "errors/error.html",
            title=_("This form is missing its payment key"),
            message=_("Reload the checkout page and try again; nothing was charged."),
        ), 400
    if not form.validate():
        # The errors are shown beside the fields; the key stays, so fixing them is still the same payment.
        cart = carts.current()
        page = _current_page(cart) if cart and not cart.empty else Page((), key, 0)
        return _render(form, Page(page.lines, key, _int(form.cart_version.data) or page.version), 422)

    version, expected_total = _int(form.cart_version.data), _int(form.expected_total.data)
    if version is None or expected_total is None:
        return _out_of_date()
    cart = carts.current()
    if once.peek(BROWSER, key, browser_identity()) is None and (cart is None or cart.empty or cart.version != version):
        # A first attempt must be for the cart as it is now. (A known key is answered from its
        # record, whatever the cart holds now: the back button, or finishing an earlier payment.)
        # No record and another cart: a stale form, or a late retry whose record was purged after
        # its lifetime. The orders' own unique (customer, key) tells them apart.
        late = _order_of_key(key) or _paid_order_of_version(cart, version)
        if late is not None:
            return late
        return _out_of_date(_("Your cart is empty.") if cart is None or cart.empty else None)
    card_number, email = form.card_digits(), form.normalized_email()
    customer_id = known_browser_customer_id()
    if customer_id is None:
        with writing():
            customer_id = browser_customer_id()
    order_request = OrderRequest(
        customer_id=customer_id,
        idempotency_key=key,
        email=email,
        card_number=card_number,
        cart=CartVersion(cart.id, version, expected_total) if cart is not None else None,
    )
    return once.respond(
        BROWSER,
        PlaceOrder(order_request, BrowserResponder(), BROWSER).phases(),
        key=key,
        # The fingerprint covers the form: a resubmitted form matches, an edited one does not.
        body={"email": email, "card_number": card_number, "cart_version": version},
        customer=browser_identity(),
        answers=CheckoutPage(form),
        wait=settings().browser_wait_seconds,
    )


def _paid_order_of_version(cart: CartView | None, version: int) -> ResponseReturnValue | None:
    """This cart version's paid order, whatever key the form carries (a second tab's, a forged one): the
    second key ends on it, charged once."""
    order = _paid_order(cart, version) if cart is not None else None
    return _to_placed(order.public_id, order.status) if order is not None else None


def _order_of_key(key: str) -> ResponseReturnValue | None:
    """The order this shopper already placed under ``key``, if any: a redirect to it."""
    customer_id = known_browser_customer_id()
    placed = find_order(customer_id, key) if customer_id is not None else None
    return _to_placed(placed.public_id, placed.status) if placed is not None else None


def _to_placed(public_id: str, status: str) -> ResponseReturnValue:
    order_url = url_for("orders.show", order_id=public_id)
    if status in WAS_PAID:
        remember_replay(order_url)  # Pay was pressed again for a paid order: its page says so
    return redirect(order_url, 303)


@dataclass(frozen=True)
class CheckoutPage:
    """The page the shopper sees for each outcome, in place of the API's JSON."""

    form: CheckoutForm

    def answer(self, outcome: Outcome, key: str) -> ResponseReturnValue:
        return _answer(outcome, self.form, key)


def _answer(outcome: Outcome, form: CheckoutForm, key: str) -> ResponseReturnValue:
    """Turn the engine's outcome into the page the shopper sees."""
    match outcome:
        case Done(response=stored, replayed=replayed, duplicates=duplicates):
            return _page_for(BrowserOutcome.from_stored(stored), form, pressed_again=replayed or duplicates > 0)
        case Refused(response=stored):
            return _page_for(BrowserOutcome.from_stored(stored), form, pressed_again=False)
        case InProgress():
            return _processing(key)
        case Mismatch():
            return _mismatched(form, key)
        case Unfinished(reference=reference, reason=reason, retry_after=retry_after):
            page = Page(_lines_of_order(reference), key, _int(form.cart_version.data) or 0)
            message = _(
                "We could not confirm your payment yet: %(reason)s. Press Pay to try again; "
                "it finishes this same payment and never charges twice.",
                reason=_(reason),
            )
            return _render(form, page, 503, error=message, headers={"Retry-After": str(retry_after)})
    raise AssertionError(f"unknown outcome {outcome!r}")


def _page_for(answer: BrowserOutcome, form: CheckoutForm, pressed_again: bool) -> ResponseReturnValue:
    """The page for a stored answer: the order, the processing page, or the checkout again with why."""
    if answer.outcome == "paid" and answer.order_url:
        # A replay, or the original of a double submit (a duplicate arrived while it ran): either
        # way Pay was pressed more than once, and whichever answer the browser shows says so (the
        # original's session cookie may be the one the browser keeps). Two tabs both say so, truly.
        if pressed_again:
            remember_replay(answer.order_url)
        return redirect(answer.order_url, 303)
    if answer.outcome == "in_progress" and answer.key:
        return _processing(answer.key)
    if answer.outcome == "out_of_date":
        return _out_of_date(_(answer.reason) if answer.reason else None)  # stored in English, shown translated
    if answer.outcome == "out_of_stock":
        names = ", ".join(_(name) for name in _names_of(answer.skus or []))
        return _rerender(
            form,
            422,
            _(
                "Sorry: %(names)s sold out while you were paying. Nothing was charged. "
                "Remove it from your cart to pay for the rest.",
                names=names,
            ),
        )
    # Declined, or abandoned and ended by reconcile: final under this key. The cart moved to a
    # new version in the same transaction, so the page offers another try with a new key.
    if answer.outcome == "abandoned":
        message = _("That payment was never completed, and nothing was charged. Please pay again.")
    else:
        message = _("Your card was declined. Nothing was charged; try another card.")
    return _rerender(form, 402, message)


def _mismatched(form: CheckoutForm, key: str) -> ResponseReturnValue:
    """Another form under a key already used: the fingerprint refuses it. But a key whose payment was abandoned
    (its worker killed, ended by reconcile) is answered as its own form would be: a tab left open on it, paid
    with another card, is told that payment never completed and is offered the cart again under a new key."""
    view = once.peek(BROWSER, key, browser_identity())
    if view is not None and view.completed and view.response is not None:
        answer = BrowserOutcome.from_stored(view.response)
        if answer.outcome == "abandoned":
            return _page_for(answer, form, pressed_again=False)
    return render_template(
        "errors/error.html",
        title=_("This payment was already started with other details"),
        message=_(
            "The same payment form was submitted before with a different email or card. "
            "Nothing new was charged. Reload the checkout page to pay for your cart."
        ),
    ), 422


def _names_of(skus: list[str]) -> list[str]:
    found = dict(db.session.execute(sa.select(Product.sku, Product.name).where(Product.sku.in_(skus))).all())
    return [found.get(sku, sku) for sku in skus]


def _lines_of_order(order_id: str | None) -> tuple[Line, ...]:
    order = db.session.scalars(sa.select(Order).where(Order.public_id == order_id)).first() if order_id else None
    return tuple(Line(i.sku, i.name, i.quantity, i.unit_price_cents) for i in order.items) if order else ()


def _processing(key: str) -> ResponseReturnValue:
    """The "still processing" page. It looks again by itself, with JavaScript or without: the HTTP ``Refresh``
    header, which every browser follows, loads ``pending`` until the first submit has an answer."""
    look = url_for("checkout.pending", key=key)
    return render_template("shop/processing.html", look=look), 202, {"Refresh": f"{LOOK_AGAIN_SECONDS}; url={look}"}


@bp.get("/checkout/pending/<key>")
def pending(key: str) -> ResponseReturnValue:
    """Where the "still processing" page looks, until the first submit has an answer."""
    try:
        key = parse_key(key)
    except InvalidKey:
        abort(404)
    view = once.peek(BROWSER, key, browser_identity())
    if view is None:
        abort(404)
    if view.completed and view.response is not None:
        answer = BrowserOutcome.from_stored(view.response)
        if answer.outcome == "paid" and answer.order_url:
            remember_replay(answer.order_url)
            return redirect(answer.order_url, 303)
        return redirect(url_for("checkout.show"), 303)  # declined: the checkout offers a new try
    if not view.lease_live:
        # Released without an outcome, or its worker died: the shopper's next Pay resumes it.
        return redirect(url_for("checkout.show"), 303)
    return _processing(key)
