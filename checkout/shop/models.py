"""The shop's tables: products, customers, carts, orders, payments.

Unique constraints back every rule on their own: one order per (customer, idempotency key), so a late retry finds
its order even after the key's record is purged; one per (cart, cart version); one key per cart version.
Design: docs/design.md#checkoutshopmodelspy-the-unique-constraints
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, aliased, mapped_column, relationship

from checkout.database import Base, BigId, UTCDateTime, public_id, utcnow

PENDING = "pending"
PAID = "paid"
DECLINED = "declined"
FAILED = "failed"  # abandoned and ended by reconcile: nothing was charged
PARTIALLY_REFUNDED = "partially_refunded"
REFUNDED = "refunded"
ORDER_STATES = (PENDING, PAID, DECLINED, FAILED, PARTIALLY_REFUNDED, REFUNDED)
# Orders that hold their stock: everything but an order that ended unpaid.
HOLDS_STOCK = (PENDING, PAID, PARTIALLY_REFUNDED, REFUNDED)
REFUNDABLE = (PAID, PARTIALLY_REFUNDED)
# Orders that were paid: a refund changes how much is kept, not that the payment went through.
WAS_PAID = (PAID, PARTIALLY_REFUNDED, REFUNDED)

REFUND_PENDING = "pending"
REFUND_SUCCEEDED = "succeeded"

MAX_QUANTITY = 99


class Product(Base):
    __tablename__ = "products"
    __table_args__ = (sa.CheckConstraint("stock >= 0", name="stock_not_negative"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sku: Mapped[str] = mapped_column(sa.String(32), unique=True)
    name: Mapped[str] = mapped_column(sa.String(100))
    description: Mapped[str] = mapped_column(sa.String(300), default="")
    emoji: Mapped[str] = mapped_column(sa.String(8), default="")
    price_cents: Mapped[int]
    currency: Mapped[str] = mapped_column(sa.String(3), default="USD")
    # What is left to sell. An order takes its quantities off in the transaction that creates it
    # (a conditional UPDATE that cannot go below zero); an order that ends unpaid gives them back.
    stock: Mapped[int] = mapped_column(default=0, server_default="0")
    # A copy made for one customer (a workshop seat's own last lamp): only they see and buy it, and it stands
    # in for the catalog's product of the same name. See ``offered_to``.
    reserved_for_id: Mapped[int | None] = mapped_column(BigId, sa.ForeignKey("customers.id"), index=True)


def offered_to(customer_id: int | None) -> sa.ColumnElement[bool]:
    """The products a customer may see and buy: the catalog's, less those a copy reserved for them stands in
    for, and their copies. (One rule, for the catalog page, the API's list, the carts and the prices.)"""
    if customer_id is None:
        return Product.reserved_for_id.is_(None)
    theirs = aliased(Product)
    copied = sa.select(theirs.id).where(theirs.reserved_for_id == customer_id, theirs.name == Product.name)
    return sa.or_(Product.reserved_for_id == customer_id, sa.and_(Product.reserved_for_id.is_(None), ~copied.exists()))


class Customer(Base):
    __tablename__ = "customers"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    public_id: Mapped[str] = mapped_column(sa.String(32), unique=True)
    name: Mapped[str | None] = mapped_column(sa.String(64), unique=True)
    # Only a hash of an API token is kept.
    token_hash: Mapped[str | None] = mapped_column(sa.String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Cart(Base):
    """A browser's cart, or an API customer's. A browser's session holds only its public id; lines and version
    live here, so a cookie replayed from before a payment cannot bring a paid cart back."""

    __tablename__ = "carts"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    public_id: Mapped[str] = mapped_column(sa.String(32), unique=True)
    customer_id: Mapped[int] = mapped_column(BigId, sa.ForeignKey("customers.id"), index=True)
    # Set on the API's cart (/api/cart), the customer's own and apart from any browser's: one per customer.
    api_customer_id: Mapped[int | None] = mapped_column(BigId, sa.ForeignKey("customers.id"), unique=True)
    # Every change bumps it; a payment is for one version.
    version: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class CartLine(Base):
    __tablename__ = "cart_lines"
    __table_args__ = (
        sa.UniqueConstraint("cart_id", "sku"),
        sa.CheckConstraint(f"quantity BETWEEN 1 AND {MAX_QUANTITY}", name="quantity"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    cart_id: Mapped[int] = mapped_column(BigId, sa.ForeignKey("carts.id", ondelete="CASCADE"))
    sku: Mapped[str] = mapped_column(sa.String(32), sa.ForeignKey("products.sku"))
    quantity: Mapped[int]


class CartKey(Base):
    """The idempotency key of one cart version, made once: every tab renders the same one."""

    __tablename__ = "cart_keys"
    __table_args__ = (sa.UniqueConstraint("cart_id", "version"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    cart_id: Mapped[int] = mapped_column(BigId, sa.ForeignKey("carts.id", ondelete="CASCADE"))
    version: Mapped[int]
    key: Mapped[str] = mapped_column(sa.String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Order(Base):
    __tablename__ = "orders"
    __table_args__ = (
        sa.UniqueConstraint("customer_id", "idempotency_key"),
        sa.UniqueConstraint("cart_id", "cart_version"),
        sa.CheckConstraint(f"status IN {ORDER_STATES!r}", name="status"),
        sa.CheckConstraint("total_cents > 0", name="total_positive"),
        # Never more refunded than charged, whatever the requests: the database refuses it.
        sa.CheckConstraint("refunded_cents >= 0 AND refunded_cents <= total_cents", name="refunded_within_total"),
        sa.Index("ix_orders_customer_created", "customer_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    public_id: Mapped[str] = mapped_column(sa.String(32), unique=True, default=lambda: public_id("ord"))
    customer_id: Mapped[int] = mapped_column(BigId, sa.ForeignKey("customers.id"))
    # The client's key: with customer_id the orders' own unique constraint, the last layer.
    idempotency_key: Mapped[str] = mapped_column(sa.String(255))
    # The cart version this order pays for (browser orders; NULL for an order sent with its lines).
    cart_id: Mapped[int | None] = mapped_column(BigId, sa.ForeignKey("carts.id"))
    cart_version: Mapped[int | None]
    # What the gateway is called with: derived from the order, the same on every retry.
    gateway_key: Mapped[str] = mapped_column(sa.String(64), unique=True)
    status: Mapped[str] = mapped_column(sa.String(20), default=PENDING)
    email: Mapped[str] = mapped_column(sa.String(254))
    card_last4: Mapped[str] = mapped_column(sa.String(4))
    total_cents: Mapped[int]
    currency: Mapped[str] = mapped_column(sa.String(3))
    charge_id: Mapped[str | None] = mapped_column(sa.String(32))
    # Refunds taken from this order so far (succeeded and under way): a refund reserves its amount
    # here with a conditional UPDATE before the gateway is asked.
    refunded_cents: Mapped[int] = mapped_column(default=0, server_default="0")
    # Paid after the shopper had already changed the cart: the cart was left as it was, and the
    # checkout says that this earlier payment went through.
    cart_moved_on: Mapped[bool] = mapped_column(default=False, server_default=sa.false())
    # The shopper's language when the order was placed: its emails are written in it, whichever
    # request pays it in the end (the gateway's webhook has no language).
    language: Mapped[str] = mapped_column(sa.String(8), default="en", server_default="en")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)

    customer: Mapped[Customer] = relationship()
    items: Mapped[list[OrderItem]] = relationship(
        back_populates="order", lazy="selectin", order_by="OrderItem.id", cascade="all, delete-orphan"
    )


class OrderItem(Base):
    __tablename__ = "order_items"
    __table_args__ = (sa.CheckConstraint(f"quantity BETWEEN 1 AND {MAX_QUANTITY}", name="quantity"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    order_id: Mapped[int] = mapped_column(BigId, sa.ForeignKey("orders.id", ondelete="CASCADE"), index=True)
    sku: Mapped[str] = mapped_column(sa.String(32))
    name: Mapped[str] = mapped_column(sa.String(100))
    quantity: Mapped[int]
    unit_price_cents: Mapped[int]

    order: Mapped[Order] = relationship(back_populates="items")

    @property
    def line_total_cents(self) -> int:
        return self.quantity * self.unit_price_cents


class Refund(Base):
    """Money given back for an order. Unique on (order, key): one key is one refund."""

    __tablename__ = "refunds"
    __table_args__ = (
        sa.UniqueConstraint("order_id", "idempotency_key"),
        sa.CheckConstraint("amount_cents > 0", name="amount_positive"),
        sa.CheckConstraint(f"status IN ('{REFUND_PENDING}', '{REFUND_SUCCEEDED}')", name="status"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    public_id: Mapped[str] = mapped_column(sa.String(32), unique=True)
    order_id: Mapped[int] = mapped_column(BigId, sa.ForeignKey("orders.id"), index=True)
    idempotency_key: Mapped[str] = mapped_column(sa.String(255))
    # What the gateway is asked with: derived from the refund, the same on every retry.
    refund_key: Mapped[str] = mapped_column(sa.String(64), unique=True)
    amount_cents: Mapped[int]
    currency: Mapped[str] = mapped_column(sa.String(3))
    reason: Mapped[str] = mapped_column(sa.String(200), default="")
    status: Mapped[str] = mapped_column(sa.String(16), default=REFUND_PENDING)
    gateway_refund_id: Mapped[str | None] = mapped_column(sa.String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class WebhookReceipt(Base):
    """A gateway event the shop has received: claimed in the transaction that applies it, so a
    repeated delivery (the gateway sends at least once) finds it and changes nothing."""

    __tablename__ = "webhook_receipts"

    event_id: Mapped[str] = mapped_column(sa.String(40), primary_key=True)
    type: Mapped[str] = mapped_column(sa.String(40))
    result: Mapped[str] = mapped_column(sa.String(40))  # applied, no change, ignored
    detail: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)
    duplicates: Mapped[int] = mapped_column(default=0, server_default="0")
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


# --- the articles' own request: POST /api/payments ----------------------------------------

PAYMENT_PENDING = "pending"
PAYMENT_SUCCEEDED = "succeeded"
PAYMENT_DECLINED = "declined"
PAYMENT_FAILED = "failed"  # abandoned and ended by reconcile: nothing was or will be charged
PAYMENT_STATES = (PAYMENT_PENDING, PAYMENT_SUCCEEDED, PAYMENT_DECLINED, PAYMENT_FAILED)
# The payments that hold their order reference: one under way, or one that went through. A declined
# or abandoned attempt holds nothing, so the client may pay that order with a new key.
PAYMENT_HOLDS_ORDER = (PAYMENT_PENDING, PAYMENT_SUCCEEDED)
Currency = Literal["UAH", "USD"]
PAYMENT_CURRENCIES = get_args(Currency)
MAX_PAYMENT_AMOUNT = 1_000_000_000  # minor units
_HOLDS_ORDER = f"status IN {PAYMENT_HOLDS_ORDER!r}"


class Payment(Base):
    """A payment for the client's own order reference (``orderId``), in minor units.

    Unique on (customer, idempotency key): a late retry, its record purged, finds its payment. And, for payments
    pending or succeeded, unique on (customer, order reference): two keys for one order can never both be charged,
    whatever the timing, because the second INSERT is refused by the database itself.
    """

    __tablename__ = "payments"
    __table_args__ = (
        sa.UniqueConstraint("customer_id", "idempotency_key"),
        sa.Index(
            "uq_payments_one_live_per_order_ref",
            "customer_id",
            "order_ref",
            unique=True,
            sqlite_where=sa.text(_HOLDS_ORDER),
            postgresql_where=sa.text(_HOLDS_ORDER),
        ),
        sa.CheckConstraint(f"status IN {PAYMENT_STATES!r}", name="status"),
        sa.CheckConstraint(f"currency IN {PAYMENT_CURRENCIES!r}", name="currency"),
        sa.CheckConstraint(f"amount > 0 AND amount <= {MAX_PAYMENT_AMOUNT}", name="amount_in_range"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    public_id: Mapped[str] = mapped_column(sa.String(32), unique=True)
    customer_id: Mapped[int] = mapped_column(BigId, sa.ForeignKey("customers.id"))
    idempotency_key: Mapped[str] = mapped_column(sa.String(255))
    # The client's ``orderId``: its own name for what it pays for (1 to 64 visible ASCII characters).
    order_ref: Mapped[str] = mapped_column(sa.String(64))
    # What the gateway is called with: derived from the payment, the same on every retry.
    gateway_key: Mapped[str] = mapped_column(sa.String(64), unique=True)
    amount: Mapped[int]
    currency: Mapped[str] = mapped_column(sa.String(3))
    status: Mapped[str] = mapped_column(sa.String(16), default=PAYMENT_PENDING)
    card_last4: Mapped[str] = mapped_column(sa.String(4))
    charge_id: Mapped[str | None] = mapped_column(sa.String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
