"""The cart lives on the server; the session holds only its id.

Every change bumps its version and a payment is for one version, so a cookie replayed from before a payment finds
the cart as it is now.
Design: docs/design.md#checkoutshopcartspy-the-cart-on-the-server
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import sqlalchemy as sa
from flask import session

from checkout.database import dialect_insert, insert_ignoring_conflicts, public_id, utcnow, writing
from checkout.extensions import db
from checkout.shop.identity import SESSION_CUSTOMER, browser_customer_id, known_browser_customer_id
from checkout.shop.models import MAX_QUANTITY, Cart, CartKey, CartLine, Customer, Product, offered_to
from checkout.shop.orders import Line

SESSION_CART = "cart"
CURRENCY = "USD"  # the catalog's one currency


@dataclass(frozen=True)
class CartItem(Line):
    """A line of the cart, with what the page shows beside it."""

    emoji: str
    currency: str

    def line(self) -> Line:
        return Line(self.sku, self.name, self.quantity, self.unit_price_cents)


@dataclass(frozen=True)
class CartView:
    id: int
    public_id: str
    version: int
    items: tuple[CartItem, ...]
    currency: str = CURRENCY

    @property
    def total_cents(self) -> int:
        return sum(item.total_cents for item in self.items)

    @property
    def empty(self) -> bool:
        return not self.items

    def lines(self) -> tuple[Line, ...]:
        return tuple(item.line() for item in self.items)


def _cart_row() -> tuple[int, str, int] | None:
    """(id, public id, version) of this session's cart, if it has one and it is this customer's."""
    cart_public_id, customer_public_id = session.get(SESSION_CART), session.get(SESSION_CUSTOMER)
    if not isinstance(cart_public_id, str) or not isinstance(customer_public_id, str):
        return None
    row = db.session.execute(
        sa.select(Cart.id, Cart.public_id, Cart.version)
        .join(Customer, Customer.id == Cart.customer_id)
        .where(Cart.public_id == cart_public_id, Customer.public_id == customer_public_id)
    ).first()
    return (row[0], row[1], row[2]) if row else None


def items_of(cart_id: int) -> tuple[CartItem, ...]:
    """The lines at today's prices; a line whose product left the catalog is not sold."""
    rows = db.session.execute(
        sa.select(CartLine.sku, Product.name, CartLine.quantity, Product.price_cents, Product.emoji, Product.currency)
        .join(Product, Product.sku == CartLine.sku)
        .where(CartLine.cart_id == cart_id)
        .order_by(CartLine.id)
    ).all()
    return tuple(CartItem(*row) for row in rows)


def current() -> CartView | None:
    """This session's cart as it is now (a read)."""
    row = _cart_row()
    if row is None:
        return None
    cart_id, cart_public_id, version = row
    return CartView(cart_id, cart_public_id, version, items_of(cart_id))


def count() -> int:
    row = _cart_row()
    if row is None:
        return 0
    total = db.session.scalar(sa.select(sa.func.sum(CartLine.quantity)).where(CartLine.cart_id == row[0]))
    return int(total or 0)


def _ensure_cart() -> int:
    """This session's cart id, created with the customer the first time (inside a unit of work)."""
    row = _cart_row()
    if row is not None:
        return row[0]
    customer_id = browser_customer_id()
    cart_public_id = public_id("cart")
    now = utcnow()
    cart_id = db.session.execute(
        sa.insert(Cart)
        .values(public_id=cart_public_id, customer_id=customer_id, version=0, created_at=now, updated_at=now)
        .returning(Cart.id)
    ).scalar_one()
    session[SESSION_CART] = cart_public_id
    return int(cart_id)


def _bump(cart_id: int) -> None:
    db.session.execute(sa.update(Cart).where(Cart.id == cart_id).values(version=Cart.version + 1, updated_at=utcnow()))


def add(sku: str, quantity: int) -> str | None:
    """Add to the cart (an increment, not a set: pressing twice adds twice); the product's name, or None."""
    with writing() as tx:
        name = tx.scalar(sa.select(Product.name).where(Product.sku == sku, offered_to(known_browser_customer_id())))
        if name is None:
            return None
        add_line(_ensure_cart(), sku, quantity)
        return str(name)


def remove(sku: str) -> None:
    row = _cart_row()
    if row is None:
        return
    with writing():
        remove_line(row[0], sku)


# --- the three changes a line can take, inside a unit of work: the browser's cart and the API's ------------


def add_line(cart_id: int, sku: str, quantity: int) -> None:
    """The increment (POST): the quantity is added to the line's (at most 99), so sending it twice adds twice."""
    insert = dialect_insert(CartLine, db.session).values(cart_id=cart_id, sku=sku, quantity=quantity)
    summed = CartLine.quantity + insert.excluded.quantity
    db.session.execute(
        insert.on_conflict_do_update(
            index_elements=[CartLine.cart_id, CartLine.sku],
            set_={"quantity": sa.case((summed > MAX_QUANTITY, MAX_QUANTITY), else_=summed)},
        )
    )
    _bump(cart_id)


def set_line(cart_id: int, sku: str, quantity: int) -> bool:
    """The set (PUT): the line's quantity becomes ``quantity``, whatever it was. Sent twice, the second finds it so
    and changes nothing, not even the version; False then."""
    insert = dialect_insert(CartLine, db.session).values(cart_id=cart_id, sku=sku, quantity=quantity)
    changed = db.session.execute(
        insert.on_conflict_do_update(
            index_elements=[CartLine.cart_id, CartLine.sku],
            set_={"quantity": insert.excluded.quantity},
            where=CartLine.quantity != insert.excluded.quantity,
        ).returning(CartLine.id)
    ).first()
    if changed is not None:
        _bump(cart_id)
    return changed is not None


def remove_line(cart_id: int, sku: str) -> bool:
    """The removal (DELETE): a removal that finds no line changes nothing, not even the version; False then."""
    removed = db.session.execute(
        sa.delete(CartLine).where(CartLine.cart_id == cart_id, CartLine.sku == sku).returning(CartLine.id)
    ).first()
    if removed is not None:
        _bump(cart_id)
    return removed is not None


def api_cart_id(customer_id: int) -> int:
    """The API customer's own cart, made the first time (inside a unit of work): unique on api_customer_id, so two
    first requests at once make one."""
    found = db.session.scalar(sa.select(Cart.id).where(Cart.api_customer_id == customer_id))
    if found is not None:
        return int(found)
    now = utcnow()
    db.session.execute(
        insert_ignoring_conflicts(Cart, db.session).values(
            public_id=public_id("cart"),
            customer_id=customer_id,
            api_customer_id=customer_id,
            version=0,
            created_at=now,
            updated_at=now,
        )
    )
    cart_id = db.session.scalar(sa.select(Cart.id).where(Cart.api_customer_id == customer_id))
    assert cart_id is not None  # ours, or a racing request's: the same cart
    return int(cart_id)


def api_items(customer_id: int) -> tuple[CartItem, ...]:
    """The API cart's lines as they are now (a read; none before its first change)."""
    cart_id = db.session.scalar(sa.select(Cart.id).where(Cart.api_customer_id == customer_id))
    return items_of(cart_id) if cart_id is not None else ()


def key_for(cart: CartView) -> str:
    """The idempotency key of this cart version: made once, in the database, whoever asks first."""
    found = db.session.scalar(sa.select(CartKey.key).where(CartKey.cart_id == cart.id, CartKey.version == cart.version))
    if found is not None:
        return str(found)
    with writing() as tx:
        tx.execute(
            insert_ignoring_conflicts(CartKey, tx).values(
                cart_id=cart.id, version=cart.version, key=str(uuid.uuid4()), created_at=utcnow()
            )
        )
        key = tx.scalar(sa.select(CartKey.key).where(CartKey.cart_id == cart.id, CartKey.version == cart.version))
    assert key is not None  # ours, or the other tab's: the same key
    return str(key)


# --- inside the payment's transactions (checkout.shop.payment) -----------------


def lines_of_version(cart_id: int, version: int) -> tuple[Line, ...] | None:
    """The lines of this cart if it is still at ``version`` (read inside the claim's unit of work), else None."""
    current_version = db.session.scalar(sa.select(Cart.version).where(Cart.id == cart_id))
    if current_version != version:
        return None
    return tuple(item.line() for item in items_of(cart_id))


def close_paid_version(cart_id: int, version: int) -> bool:
    """The order for this version is paid: empty the cart. False if the shopper changed it meanwhile
    (then it is left as it is: its lines are not what was paid)."""
    moved = db.session.execute(
        sa.update(Cart)
        .where(Cart.id == cart_id, Cart.version == version)
        .values(version=Cart.version + 1, updated_at=utcnow())
        .returning(Cart.id)
    ).first()
    if moved is None:
        return False
    db.session.execute(sa.delete(CartLine).where(CartLine.cart_id == cart_id))
    return True


def retire_version(cart_id: int, version: int) -> None:
    """This version's payment ended unpaid: the same lines get a new version, so the next try a new key."""
    db.session.execute(
        sa.update(Cart)
        .where(Cart.id == cart_id, Cart.version == version)
        .values(version=Cart.version + 1, updated_at=utcnow())
    )


def version_key(cart_id: int, version: int) -> str | None:
    return db.session.scalar(sa.select(CartKey.key).where(CartKey.cart_id == cart_id, CartKey.version == version))
