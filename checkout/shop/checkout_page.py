"""The browser checkout: the form with its idempotency key, and POST /checkout.

The server alone prevents the duplicate; the hidden key and the disabled
button only make it rarer and the experience kinder.
"""

from __future__ import annotations

from flask import Blueprint, Response, abort, current_app, redirect, render_template, url_for

from checkout.database import utcnow
from checkout.gateway.cards import TEST_CARDS, digits_only, pretty
from checkout.idempotency import (
    COMPLETED,
    Done,
    IdempotencyRecord,
    InProgress,
    MalformedKey,
    Mismatch,
    MissingKey,
    Outcome,
    Scope,
    Unfinished,
    execute,
    fingerprint,
    had_duplicates,
    parse_key,
    peek,
)
from checkout.shop import cart
from checkout.shop.forms import CheckoutForm
from checkout.shop.identity import browser_customer, ensure_browser_identity
from checkout.shop.orders_page import remember_replay
from checkout.shop.placement import OrderRequest, place_order
from checkout.shop.responders import BROWSER_ENDPOINT, OUTCOME_HEADER, BrowserResponder
from checkout.shop.runtime import fingerprint_secret, gateway, idempotency_settings

bp = Blueprint("checkout", __name__)

CURRENCY = "USD"


def _scope(key: str) -> Scope:
    return Scope(ensure_browser_identity(), BROWSER_ENDPOINT, key)


def _paid_order_url(record: IdempotencyRecord) -> str | None:
    """Where the order lives, if this record is a completed, paid operation."""
    if record.state == COMPLETED and record.response_status == 303:
        return (record.response_headers or {}).get("Location")
    return None


def _key_for_this_cart() -> tuple[str, str | None]:
    """The key to render, and the paid order's URL if that key's payment already went through.

    A reload or a return after an error renders the same key; a changed cart
    gets a new one; a declined key is final, so the next try gets a new one;
    and a cart that was paid (its answer was lost) never gets a fresh key.
    """
    remembered = cart.remembered_key()
    if remembered is None:
        return cart.remember_new_key(), None
    key, version = remembered
    record = peek(_scope(key))
    if record is None:
        return (key, None) if version == cart.version() else (cart.remember_new_key(), None)
    if record.state == COMPLETED:
        paid_url = _paid_order_url(record)
        return (key, paid_url) if paid_url else (cart.remember_new_key(), None)
    return key, None  # in progress or waiting for a retry: keep it, a retry must resume


def _render_form(
    form: CheckoutForm, status: int = 200, *, error: str | None = None, paid_url: str | None = None
) -> tuple[str, int]:
    lines = cart.lines()
    total = sum(line.total_cents for line in lines)
    return render_template(
        "shop/checkout.html",
        form=form,
        lines=lines,
        total_cents=total,
        currency=CURRENCY,
        error=error,
        paid_url=paid_url,
        test_cards=[(pretty(number), text) for number, (_b, text) in TEST_CARDS.items()],
    ), status


@bp.get("/checkout")
def show() -> tuple[str, int] | Response:
    if not cart.items():
        return redirect(url_for("shop.cart"))
    key, paid_url = _key_for_this_cart()
    form = CheckoutForm(formdata=None, idempotency_key=key, cart_version=str(cart.version()))
    return _render_form(form, paid_url=paid_url)


@bp.post("/checkout")
def pay() -> tuple[str, int] | Response:
    form = CheckoutForm()
    try:
        key = parse_key(form.idempotency_key.data)
    except (MissingKey, MalformedKey):
        return render_template(
            "errors/error.html",
            title="This form is missing its payment key",
            message="Reload the checkout page and try again; nothing was charged.",
        ), 400
    if not form.validate():
        return _render_form(form, 422)

    scope = _scope(key)
    card_number = digits_only(form.card_number.data or "")
    email = (form.email.data or "").strip()
    # The fingerprint covers the form: a resubmitted form matches, an edited one does not.
    form_data = {"email": email, "card_number": card_number, "cart_version": form.cart_version.data}
    request_fingerprint = fingerprint(fingerprint_secret(), "POST", BROWSER_ENDPOINT, form_data)

    record = peek(scope)
    # A first attempt must be for the cart as it is now. (A known key is
    # answered from its record, whatever the cart holds now: the back button.)
    if record is None and form.cart_version.data != str(cart.version()):
        return render_template("shop/out_of_date.html"), 422
    lines = cart.order_lines(cart.lines())
    if not lines and (record is None or record.state != COMPLETED):
        return redirect(url_for("shop.cart"), 303)  # nothing to pay for, and nothing to replay
    customer = browser_customer()
    order_request = OrderRequest(
        customer_id=customer.id,
        idempotency_key=key,
        lines=lines,
        email=email,
        card_number=card_number,
        currency=CURRENCY,
    )
    outcome = execute(
        scope,
        request_fingerprint,
        lambda operation: place_order(operation, order_request, BrowserResponder(), gateway()),
        settings=idempotency_settings(),
        wait_seconds=float(current_app.config["CHECKOUT_BROWSER_WAIT_SECONDS"]),
    )
    return _answer(outcome, form, scope)


def _answer(outcome: Outcome, form: CheckoutForm, scope: Scope) -> tuple[str, int] | Response:
    """Turn the engine's outcome into the page the shopper sees."""
    key = scope.key
    if isinstance(outcome, Done):
        location = outcome.response.headers.get("Location", url_for("orders.index"))
        if outcome.response.status == 303:
            # Paid. Clear the cart on the replay too: the last cookie the browser keeps may be this one's.
            cart.clear()
            # A replay, or the original of a double submit (a duplicate waited on it): either way the
            # shopper pressed Pay more than once, and whichever answer the browser shows says so.
            if outcome.replayed or had_duplicates(scope):
                remember_replay(location)
            return redirect(location, 303)
        # Declined (or abandoned and ended by reconcile): final under this key. Offer another try with a new key.
        remembered = cart.remembered_key()
        next_key = remembered[0] if remembered and remembered[0] != key else cart.remember_new_key()
        retry = CheckoutForm(
            formdata=None, email=form.email.data, idempotency_key=next_key, cart_version=str(cart.version())
        )
        if outcome.response.headers.get(OUTCOME_HEADER) == "abandoned":
            message = "That payment was never completed, and nothing was charged. Please pay again."
        else:
            message = "Your card was declined. Nothing was charged; try another card."
        return _render_form(retry, 402, error=message)
    if isinstance(outcome, InProgress):
        return render_template("shop/processing.html", key=key), 202
    if isinstance(outcome, Mismatch):
        return render_template(
            "errors/error.html",
            title="This payment was already started with other details",
            message="The same payment form was submitted before with a different email or card. "
            "Nothing new was charged. Reload the checkout page to pay for your cart.",
        ), 422
    if isinstance(outcome, Unfinished):
        form.idempotency_key.data = key
        return _render_form(
            form,
            503,
            error=f"We could not confirm your payment yet: {outcome.reason}. "
            "Press Pay to try again; it finishes this same payment and never "
            "charges twice.",
        )
    raise AssertionError(f"unknown outcome {outcome!r}")


@bp.get("/checkout/pending/<key>")
def pending(key: str) -> tuple[str, int] | Response:
    """Where the "still processing" page refreshes to, until the first submit has an answer."""
    try:
        key = parse_key(key)
    except (MissingKey, MalformedKey):
        abort(404)
    record = peek(_scope(key))
    if record is None:
        abort(404)
    if record.state == COMPLETED:
        paid_url = _paid_order_url(record)
        if paid_url:
            cart.clear()
            remember_replay(paid_url)
            return redirect(paid_url, 303)
        return redirect(url_for("checkout.show"), 303)  # declined: the checkout offers a new try
    if record.locked_by is None or (record.locked_until and record.locked_until < utcnow()):
        # Released without an outcome, or its worker died: the shopper's next Pay resumes it.
        return redirect(url_for("checkout.show"), 303)
    return render_template("shop/processing.html", key=key), 202
