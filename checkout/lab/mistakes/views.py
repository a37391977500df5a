"""The mistakes in the lab: the nine wrong twins' API, their pages, and a form that sends their triggers.

The form sends over HTTP to ``CHECKOUT_SHOP_URL``, as a client would, never to the address its own request names
(its Host header is the sender's to forge, and the request carries a bearer token). 404 when the lab is off.
Design: docs/design.md#checkoutlabmistakesviewspy-the-nine-wrong-twins-in-the-lab
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from flask import Blueprint, Response, abort, current_app, redirect, render_template, session, url_for
from flask.typing import ResponseReturnValue
from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from wtforms import IntegerField, SelectField, StringField, SubmitField
from wtforms.validators import DataRequired, Length, NumberRange

from checkout.client import PURCHASE_HEADER
from checkout.errors import Problem
from checkout.extensions import csrf
from checkout.gateway.cards import TEST_CARDS, pretty
from checkout.i18n import N_, current_language
from checkout.idempotency.store import worker_name
from checkout.lab import damage, http, lab_only
from checkout.lab.mistakes.catalog import BY_NAME, MISTAKES, SAFE_ENDPOINT, Mistake
from checkout.shop.api import place_order, token_required
from checkout.shop.seed import DEMO_CUSTOMERS

bp = lab_only(Blueprint("mistakes", __name__))

TOKENS = {name: token for name, _public, token in DEMO_CUSTOMERS}
SENT = "mistakes_sent"  # the session's last answers of the form, across the nine pages
KEYS = "mistakes_keys"  # the form's key, per mistake: pressing Send again is a retry
FORM = "mistakes_form"  # the form's other fields, as last sent
WORKER_HEADER = "Lab-Worker"  # which process answered: in memory-store, that is the whole story
REMEMBERED = 8
MAX_COPIES = 10


@bp.post("/api/lab/mistakes/<name>/orders")
@token_required
def place(name: str) -> Response:
    mistake = BY_NAME.get(name)
    if mistake is None:
        raise Problem(404, "No such mistake", f"The lab's mistakes are: {', '.join(BY_NAME)}.")
    response = place_order(mistake.pipeline)
    # Which process answered (host:pid): with several workers, each twin answer shows where it ran.
    response.headers[WORKER_HEADER] = worker_name()
    return response


csrf.exempt(place)  # bearer tokens are not cookies: no CSRF to forge (as the real API)


# --- the pages -------------------------------------------------------------------------------


@bp.get("/lab/mistakes")
def index() -> ResponseReturnValue:
    return render_template("lab/mistakes.html", mistakes=MISTAKES, damage=damage.by_path(), empty=damage.Totals())


def _mistake(name: str) -> Mistake:
    mistake = BY_NAME.get(name)
    if mistake is None:
        abort(404)
    return mistake


class SendForm(FlaskForm):  # type: ignore[misc]  # Flask-WTF ships no type information
    """One request (or a storm of copies) to the twin or to the safe endpoint, as Alice or Bob."""

    # Plain values as choices (WTForms 3.3 deprecates tuples; its type stubs still expect them).
    customer = SelectField(_l("Customer"), choices=list(TOKENS))  # type: ignore[arg-type]
    key = StringField(
        "Idempotency-Key",
        validators=[DataRequired(_l("Give a key.")), Length(16, 255, _l("A key is 16 to 255 characters."))],
    )
    card = SelectField(_l("Card"), choices=[pretty(digits) for digits in TEST_CARDS])  # type: ignore[misc]
    quantity = IntegerField(_l("Mugs"), default=2, validators=[NumberRange(1, 99, _l("From 1 to 99 mugs."))])
    copies = IntegerField(
        _l("Copies at once"),
        default=1,
        validators=[NumberRange(1, MAX_COPIES, _l("From 1 to %(most)d copies.", most=MAX_COPIES))],
    )
    wrong = SubmitField(_l("Send to the wrong twin"))
    safe = SubmitField(_l("Send to the safe POST /api/orders"))
    new_key = SubmitField(_l("New key"))


CARD_HINT = N_("…0259: the answer is lost once; …0119: the gateway is down once; …0077: slow; …0002: declined.")
CUSTOMER_HINT = N_("The demo customers, each with their own API token.")


def _new_key(name: str) -> str:
    key = str(uuid.uuid4())
    session[KEYS] = {**session.get(KEYS, {}), name: key}
    return key


def _form_for(name: str) -> SendForm:
    last = session.get(FORM, {})
    return SendForm(
        formdata=None,
        customer=last.get("customer", "alice"),
        key=session.get(KEYS, {}).get(name) or _new_key(name),
        card=last.get("card", pretty("4242424242424242")),
        quantity=last.get("quantity", 2),
        copies=last.get("copies", 1),
    )


def _page(mistake: Mistake, form: SendForm, status: int = 200) -> ResponseReturnValue:
    at = MISTAKES.index(mistake)
    by_path = damage.by_path()
    return render_template(
        "lab/mistake.html",
        mistake=mistake,
        form=form,
        card_hint=CARD_HINT,
        customer_hint=CUSTOMER_HINT,
        sent=[entry for entry in session.get(SENT, []) if entry["mistake"] == mistake.name],
        twin=by_path.get(mistake.path, damage.Totals()),
        safe=by_path.get("safe", damage.Totals()),
        previous=MISTAKES[at - 1] if at > 0 else None,
        following=MISTAKES[at + 1] if at + 1 < len(MISTAKES) else None,
    ), status


@bp.get("/lab/mistakes/<name>")
def show(name: str) -> ResponseReturnValue:
    return _page(_mistake(name), _form_for(name))


@bp.post("/lab/mistakes/<name>/send")
def send(name: str) -> ResponseReturnValue:
    mistake = _mistake(name)
    form = SendForm()
    if form.new_key.data:
        _new_key(name)
        return redirect(url_for("mistakes.show", name=name, _anchor="try-it"), 303)
    if not form.validate():
        return _page(mistake, form, 422)
    session[KEYS] = {**session.get(KEYS, {}), name: (form.key.data or "").strip()}
    session[FORM] = {
        "customer": form.customer.data,
        "card": form.card.data,
        "quantity": form.quantity.data,
        "copies": form.copies.data,
    }
    target = "safe" if form.safe.data else "wrong"
    answers = _send_copies(mistake, target, form)
    entries = [_entry(mistake.name, target, form, status, headers, body) for status, headers, body in answers]
    session[SENT] = [*session.get(SENT, []), *entries][-REMEMBERED:]
    return redirect(url_for("mistakes.show", name=name, _anchor="requests"), 303)


def _send_copies(mistake: Mistake, target: str, form: SendForm) -> list[http.Answer]:
    """Send ``copies`` identical requests at the same instant (a barrier, not a sleep), over HTTP to this shop."""
    key = (form.key.data or "").strip()
    app = current_app._get_current_object()  # type: ignore[attr-defined]  # the threads have no app context
    path = "/api/orders" if target == "safe" else mistake.url
    body = json.dumps(
        {
            "items": [{"sku": "MUG-01", "quantity": form.quantity.data}],
            "email": f"{form.customer.data}@example.com",
            "card_number": form.card.data,
        }
    ).encode()
    headers = {
        # One purchase per key, for the damage table: every retry and every copy is the same purchase.
        PURCHASE_HEADER: "lab-form-" + hashlib.sha256(key.encode()).hexdigest()[:16],
        "Content-Type": "application/json",
        "Authorization": f"Bearer {TOKENS[form.customer.data]}",
        "Idempotency-Key": key,
        "Accept-Language": current_language(),  # the order's emails in the page's language
    }
    copies = form.copies.data or 1
    barrier = threading.Barrier(copies)

    def one(_index: int) -> http.Answer:
        barrier.wait()
        return http.send(app, "POST", path, headers=headers, body=body)

    with ThreadPoolExecutor(max_workers=copies) as pool:
        return list(pool.map(one, range(copies)))


def _entry(name: str, target: str, form: SendForm, status: int, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """What the page shows of one answer (kept small: it lives in the session cookie)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = {}
    parsed = parsed if isinstance(parsed, dict) else {}
    order: dict[str, str] | None = None
    if "id" in parsed:
        # An order: kept as data (the page words it in its own language); the items are identifiers (SKUs).
        items = ", ".join(f"{item['quantity']} × {item['sku']}" for item in parsed.get("items", []))
        order = {
            "status": str(parsed.get("status", "")),
            "items": items[:60],
            "email": str(parsed.get("email", ""))[:60],
            "last4": str(parsed.get("card_last4", ""))[:4],
        }
        said = ""
    else:  # a problem's title, in the API's English (its words are part of the contract)
        said = str(parsed.get("title") or parsed.get("detail") or parsed.get("status") or "")
    return {
        "mistake": name,
        "target": "wrong twin" if target == "wrong" else SAFE_ENDPOINT,
        "customer": form.customer.data,
        "key": (form.key.data or "").strip()[:8],
        "status": status,
        "replayed": headers.get("Idempotent-Replayed") == "true",
        "order": str(parsed.get("id") or parsed.get("order_id") or ""),
        "said": said[:90],
        "answer": order,
        "worker": headers.get(WORKER_HEADER, "").rsplit(":", 1)[-1],
    }
