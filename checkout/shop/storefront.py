"""The catalog and the session cart."""

from __future__ import annotations

import sqlalchemy as sa
from flask import Blueprint, Response, flash, redirect, render_template, request, url_for

from checkout.extensions import db
from checkout.shop import cart
from checkout.shop.forms import AddToCartForm, EmptyForm
from checkout.shop.identity import ensure_browser_identity
from checkout.shop.models import Product

bp = Blueprint("shop", __name__)


@bp.before_app_request
def _identify() -> None:
    """An anonymous customer per browser session, from the first visit (API clients use tokens)."""
    if request.blueprint != "api" and request.endpoint != "static" and not request.path.startswith("/api/"):
        ensure_browser_identity()


@bp.get("/")
def catalog() -> str:
    products = db.session.scalars(sa.select(Product).order_by(Product.id)).all()
    db.session.commit()
    return render_template("shop/catalog.html", products=products, form=AddToCartForm())


@bp.get("/cart", endpoint="cart")
def show_cart() -> str:
    lines = cart.lines()
    return render_template(
        "shop/cart.html", lines=lines, total_cents=sum(line.total_cents for line in lines), remove_form=EmptyForm()
    )


@bp.post("/cart/items")
def add_item() -> Response | tuple[str, int]:
    form = AddToCartForm()
    if not form.validate():
        return render_template(
            "errors/error.html", title="That could not be added", message="Choose a quantity from 1 to 99."
        ), 422
    product = db.session.scalars(sa.select(Product).where(Product.sku == form.sku.data)).first()
    db.session.commit()
    if product is None:
        return render_template(
            "errors/error.html", title="No such product", message="That product is not in the catalog."
        ), 404
    cart.add(product.sku, form.quantity.data or 1)
    flash(f"Added {product.name} to your cart.", "success")
    return redirect(url_for("shop.catalog"), 303)


@bp.post("/cart/items/<sku>/delete")
def remove_item(sku: str) -> Response:
    cart.remove(sku)
    flash("Removed from your cart.", "info")
    return redirect(url_for("shop.cart"), 303)
