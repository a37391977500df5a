"""The catalog and the cart."""

from __future__ import annotations

import sqlalchemy as sa
from flask import Blueprint, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _

from checkout.extensions import db
from checkout.shop import carts, schemas
from checkout.shop.forms import AddToCartForm, EmptyForm
from checkout.shop.identity import identify_browser, known_browser_customer_id
from checkout.shop.models import Product, offered_to

bp = Blueprint("shop", __name__)
bp.before_app_request(identify_browser)


@bp.get("/")
def catalog() -> ResponseReturnValue:
    offered = offered_to(known_browser_customer_id())
    products = db.session.scalars(sa.select(Product).where(offered).order_by(Product.id)).all()
    return render_template("shop/catalog.html", products=products, form=AddToCartForm())


@bp.get("/cart", endpoint="cart")
def show_cart() -> ResponseReturnValue:
    cart = carts.current()
    return render_template(
        "shop/cart.html",
        items=cart.items if cart else (),
        total_cents=cart.total_cents if cart else 0,
        remove_form=EmptyForm(),
    )


@bp.post("/cart/items")
def add_item() -> ResponseReturnValue:
    form = AddToCartForm()
    if not form.validate():
        message = _("That is not a product.") if form.sku.errors else _("Choose a quantity from 1 to 99.")
        return render_template("errors/error.html", title=_("That could not be added"), message=message), 422
    name = carts.add(schemas.clean_sku(form.sku.data), schemas.clean_quantity(form.quantity.data))
    if name is None:
        return render_template(
            "errors/error.html", title=_("No such product"), message=_("That product is not in the catalog.")
        ), 404
    flash(_("Added %(name)s to your cart.", name=_(name)), "success")
    return redirect(url_for("shop.catalog"), 303)


@bp.post("/cart/items/<sku>/delete")
def remove_item(sku: str) -> ResponseReturnValue:
    try:
        carts.remove(schemas.clean_sku(sku))
    except schemas.Invalid:
        return render_template(
            "errors/error.html", title=_("No such product"), message=_("That product is not in your cart.")
        ), 404
    flash(_("Removed from your cart."), "info")
    return redirect(url_for("shop.cart"), 303)
