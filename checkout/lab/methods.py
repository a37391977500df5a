"""The methods page (``/lab/methods``): each of the cart's requests sent twice, and the cart after each send.

PUT and DELETE leave the cart as their first send left it; POST adds again; POST with one Idempotency-Key adds once
and replays its first answer. Sent over HTTP to this shop with a demo customer's bearer token, as a client would.
Design: docs/lab.md#checkoutlabmethodspy-set-remove-add
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from flask import Blueprint, current_app, redirect, render_template, session, url_for
from flask.typing import ResponseReturnValue
from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from wtforms import IntegerField, SelectField, SubmitField
from wtforms.validators import NumberRange

from checkout.lab import http, lab_only
from checkout.shop.seed import DEMO_CUSTOMERS, PRODUCTS

bp = lab_only(Blueprint("methods", __name__))

TOKENS = {name: token for name, _public, token in DEMO_CUSTOMERS}
SENT = "methods_sent"  # the last pair of sends: what the page shows
# Each button: the method, the path, whether it carries a key, and its body.
REQUESTS = {
    "put": ("PUT", "/api/cart/lines/{sku}", False),
    "delete": ("DELETE", "/api/cart/lines/{sku}", False),
    "post": ("POST", "/api/cart/lines", False),
    "post_key": ("POST", "/api/cart/lines", True),
}


class MethodsForm(FlaskForm):  # type: ignore[misc]  # Flask-WTF ships no type information
    customer = SelectField(_l("Customer"), choices=list(TOKENS))  # type: ignore[arg-type]
    sku = SelectField(_l("Product"), choices=[sku for sku, *_rest in PRODUCTS])  # type: ignore[misc]
    quantity = IntegerField(_l("Quantity"), default=2, validators=[NumberRange(1, 99, _l("From 1 to 99."))])
    put = SubmitField(_l("PUT twice"))
    delete = SubmitField(_l("DELETE twice"))
    post = SubmitField(_l("POST twice"))
    post_key = SubmitField(_l("POST twice, one key"))


def _cart_text(body: bytes) -> dict[str, Any]:
    """The cart a GET answered, kept small (it lives in the session cookie)."""
    try:
        cart = json.loads(body)
        lines = ", ".join(f"{line['quantity']} × {line['sku']}" for line in cart["lines"])
        return {"lines": lines[:120], "total_cents": int(cart["total_cents"])}
    except (ValueError, KeyError, TypeError):
        return {"lines": "?", "total_cents": 0}


def _send_twice(form: MethodsForm, button: str) -> list[dict[str, Any]]:
    method, path_template, keyed = REQUESTS[button]
    sku, quantity = form.sku.data, form.quantity.data
    path = path_template.format(sku=sku)
    body = (
        {"quantity": quantity} if method == "PUT" else {"sku": sku, "quantity": quantity} if method == "POST" else None
    )
    headers = {"Authorization": f"Bearer {TOKENS[form.customer.data]}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    if keyed:
        headers["Idempotency-Key"] = str(uuid.uuid4())
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    sent = []
    for attempt in (1, 2):
        status, answered, _body = http.send(
            app, method, path, headers=headers, body=json.dumps(body).encode() if body is not None else None
        )
        _status, _headers, cart = http.send(
            app, "GET", "/api/cart", headers={"Authorization": headers["Authorization"]}
        )
        sent.append(
            {
                "attempt": attempt,
                "request": f"{method} {path}" + (f" {json.dumps(body)}" if body is not None else ""),
                "key": headers.get("Idempotency-Key", "")[:8],
                "status": status,
                "replayed": answered.get("Idempotent-Replayed") == "true",
                "cart": _cart_text(cart),
            }
        )
    return sent


def _page(form: MethodsForm, status: int = 200) -> ResponseReturnValue:
    return render_template("lab/methods.html", form=form, sent=session.get(SENT, [])), status


@bp.get("/lab/methods")
def page() -> ResponseReturnValue:
    last = session.get(SENT + "_form", {})
    return _page(MethodsForm(formdata=None, **last))


@bp.post("/lab/methods")
def send() -> ResponseReturnValue:
    form = MethodsForm()
    button = next((name for name in REQUESTS if getattr(form, name).data), None)
    if button is None or not form.validate():
        return _page(form, 422)
    session[SENT + "_form"] = {"customer": form.customer.data, "sku": form.sku.data, "quantity": form.quantity.data}
    session[SENT] = _send_twice(form, button)
    return redirect(url_for("methods.page", _anchor="sent"), 303)
