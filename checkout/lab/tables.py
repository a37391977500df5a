"""What the lab keeps beside the shop's rows, in its own tables: which checkout placed each order
and refund, the client's purchase label and how much stock was ever seeded (the shop tells it through
signals, checkout/shop/orders.py), and the log of the requests under a key (checkout/lab/requests.py). With
the lab off nobody listens and nothing is kept.

The shop names none of it: a checkout path is the lab's variant of a pipeline (``LabPipeline``), and a purchase
is what the request says it is: the ``Lab-Purchase`` header of the lab's clients, or the cart version a browser
paid for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from flask import Flask, g, has_request_context, request
from sqlalchemy.orm import Mapped, mapped_column

from checkout.client import PURCHASE_HEADER
from checkout.database import Base, BigId, UTCDateTime, insert_ignoring_conflicts, table_of, utcnow
from checkout.extensions import db
from checkout.shop import orders
from checkout.shop.models import Cart, Order
from checkout.shop.payment import PaymentPipeline

SAFE = "safe"  # an order no twin placed (or one placed while the lab was off)
# PURCHASE_HEADER: an API client's own name for its purchase, the same on every retry and duplicate (the retry
# client, the mass test and the mistakes' pages send it): 1 to 64 visible ASCII characters.
_PURCHASE = re.compile(r"[\x21-\x7e]{1,64}")


@dataclass(frozen=True)
class LabPipeline(PaymentPipeline):
    """One of the lab's variants of a shop pipeline: the checkout path its orders and refunds are counted under."""

    path: str = SAFE


def variant(base: PaymentPipeline, path: str, **swapped: Any) -> LabPipeline:
    """``base`` as the lab's ``path``, with the parts ``swapped``: a mistake is a diff of the real code."""
    return LabPipeline(**{**{f.name: getattr(base, f.name) for f in fields(base)}, **swapped, "path": path})


def purchase_of(cart_public_id: str, version: int) -> str:
    """The purchase a cart version is: two submits of one version are one purchase."""
    return f"{cart_public_id}:v{version}"


def name_the_purchase(purchase: str | None) -> None:
    """A lab page's own form names its purchase (the unsafe checkout's hidden field) for the order it places."""
    g.lab_purchase = purchase


class LabOrder(Base):
    __tablename__ = "lab_orders"

    order_id: Mapped[int] = mapped_column(BigId, sa.ForeignKey("orders.id", ondelete="CASCADE"), primary_key=True)
    # Which checkout placed it: "safe", or one of the lab's variants ("unsafe", "mistake:<name>", ...).
    path: Mapped[str] = mapped_column(sa.String(40), default=SAFE)
    # The client's own name for the purchase (``PURCHASE_HEADER``, a lab form's field, a cart version), the same
    # on every retry and every duplicate: the lab counts money per purchase with it. Never used to deduplicate.
    purchase_ref: Mapped[str | None] = mapped_column(sa.String(64), index=True)


class LabRefund(Base):
    __tablename__ = "lab_refunds"

    refund_id: Mapped[int] = mapped_column(BigId, sa.ForeignKey("refunds.id", ondelete="CASCADE"), primary_key=True)
    path: Mapped[str] = mapped_column(sa.String(40), default=SAFE)


class LabStock(Base):
    """Everything ever put on a shelf: always its stock plus what the orders holding stock took."""

    __tablename__ = "lab_stock"

    sku: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    seeded: Mapped[int] = mapped_column(default=0)


class LabRequest(Base):
    """A known customer's POST under a key, as it was answered: /api/lab/requests lists them (requests.py)."""

    __tablename__ = "lab_requests"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(255), index=True)
    endpoint: Mapped[str] = mapped_column(sa.String(100))
    customer: Mapped[str] = mapped_column(sa.String(64))
    status: Mapped[int | None]  # None until it is answered (or if its worker died first)
    replayed: Mapped[bool] = mapped_column(default=False)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


def path_of_order() -> Any:
    """The checkout path of ``orders`` rows, for a query joined with ``LabOrder`` (outer: "safe" if none)."""
    # A literal, not a bound parameter: PostgreSQL must see the same expression in SELECT and GROUP BY.
    return sa.func.coalesce(LabOrder.path, sa.literal_column(f"'{SAFE}'"))


def charged_for(reference: Any, order_public_id: Any) -> Any:
    """A charge's reference names the order: its id, or, for a twin that charges per attempt, "<id>/<attempt>"."""
    return sa.or_(reference == order_public_id, reference.like(order_public_id + "/%"))


# Built once, the values bound at each execution: every payment runs one (SQLAlchemy would rebuild
# and hash the cache key of a statement made with .values(...) each time).
_INSERT_ORDER = sa.insert(table_of(LabOrder))
_INSERT_REFUND = sa.insert(table_of(LabRefund))


def listen(app: Flask) -> None:
    """Keep the lab's rows for ``app`` (an app with the lab on): its signals only, so an app with the lab
    off in the same process (the tests build many) is told to nobody."""
    orders.order_placed.connect(_order_placed, sender=app)
    orders.refund_placed.connect(_refund_placed, sender=app)
    orders.stocked.connect(_stocked, sender=app)


def _path_of(pipeline: object) -> str:
    return pipeline.path if isinstance(pipeline, LabPipeline) else SAFE


def _named_purchase() -> str | None:
    """The purchase the request names: a lab form's field, or the header. (Not the body: the API reads it once,
    uncached, and a ``purchase`` field clients sent before the header is ignored with the body's other extras.)"""
    if not has_request_context():
        return None
    named = g.get("lab_purchase") or request.headers.get(PURCHASE_HEADER)
    return str(named) if named else None


def _purchase(order_id: int) -> str | None:
    """What the request that placed the order says its purchase is (told in that request's unit of work), else
    the cart version a browser paid for."""
    named = _named_purchase()
    if named is not None:
        return named if _PURCHASE.fullmatch(named) else None
    paid = db.session.execute(
        sa.select(Cart.public_id, Order.cart_version).join(Cart, Cart.id == Order.cart_id).where(Order.id == order_id)
    ).first()
    return purchase_of(paid.public_id, paid.cart_version) if paid is not None else None


def _order_placed(_app: Flask, *, pipeline: object, order_id: int) -> None:
    purchase = _purchase(order_id)
    db.session.execute(_INSERT_ORDER, {"order_id": order_id, "path": _path_of(pipeline), "purchase_ref": purchase})


def _refund_placed(_app: Flask, *, pipeline: object, refund_id: int) -> None:
    db.session.execute(_INSERT_REFUND, {"refund_id": refund_id, "path": _path_of(pipeline)})


def _stocked(_app: Flask, *, sku: str, added: int) -> None:
    session = db.session()
    stock = table_of(LabStock)
    session.execute(insert_ignoring_conflicts(stock, session).values(sku=sku, seeded=0))
    session.execute(sa.update(stock).where(stock.c.sku == sku).values(seeded=stock.c.seeded + added))
