"""Demo data: the catalog with its stock, and the demo API customers in development."""

from __future__ import annotations

import sqlalchemy as sa

from checkout.database import insert_ignoring_conflicts, utcnow
from checkout.extensions import db
from checkout.i18n import N_
from checkout.shop import orders
from checkout.shop.identity import hash_token
from checkout.shop.models import Customer, Product

# Enough for the mass test and the benchmarks, run again and again; the last product has one.
PLENTY = 100_000
PRODUCTS = [
    ("MUG-01", N_("Idempotent Mug"), N_("Pour twice, fill once."), "☕️", 1400, PLENTY),
    ("TEE-01", N_("Exactly-Once T-shirt"), N_("Soft cotton, printed a single time."), "👕", 2400, PLENTY),
    ("STK-01", N_("Retry Sticker Pack"), N_("Ten stickers; sticking one twice is safe."), "🏷️", 500, PLENTY),
    ("NOTE-01", N_("Ledger Notebook"), N_("Append-only, dotted pages."), "📓", 1250, PLENTY),
    ("HOOD-01", N_("Lease Hoodie"), N_("Warm until it expires."), "🧥", 4800, PLENTY),
    ("CAP-01", N_("UUIDv4 Cap"), N_("One in 2^122 chance someone has the same."), "🧢", 1900, PLENTY),
    ("POST-01", N_("Two Generals Poster"), N_("A classic about lost answers."), "🖼️", 1600, PLENTY),
    ("KEY-01", N_("Pay Keycap"), N_("Press it as often as you like."), "⌨️", 900, PLENTY),
    ("SOCK-01", N_("At-Most-Once Socks"), N_("A pair, never two."), "🧦", 1100, PLENTY),
    ("TOTE-01", N_("Recovery Point Tote"), N_("Carries on from where you left off."), "👜", 1800, PLENTY),
    ("LAST-01", N_("Last-One Lamp"), N_("Only one was ever made: two tabs can race for it."), "💡", 3200, 1),
]

DEMO_CUSTOMERS = [("alice", "cus_demo_alice", "demo-alice-token"), ("bob", "cus_demo_bob", "demo-bob-token")]


def seed(*, demo_customers: bool, reset_stock: bool = False) -> dict[str, int]:
    """Insert what is missing; running it twice changes nothing (today's stock stays).

    ``reset_stock`` puts every product's seeded stock back on the shelf. What is put on a shelf is told
    (``orders.stocked``) to whoever keeps the stock's accounts. (Call inside a unit of work.)
    """
    products = 0
    for sku, name, description, emoji, price, stock in PRODUCTS:
        inserted = db.session.execute(
            insert_ignoring_conflicts(Product, db.session)
            .values(
                sku=sku, name=name, description=description, emoji=emoji, price_cents=price, currency="USD", stock=stock
            )
            .returning(Product.id)
        ).all()
        products += len(inserted)
        added = stock if inserted else 0
        if reset_stock and not inserted:
            # Locked (PostgreSQL; SQLite's writer holds the database): no order takes stock in between.
            before = db.session.scalar(sa.select(Product.stock).where(Product.sku == sku).with_for_update())
            db.session.execute(sa.update(Product).where(Product.sku == sku).values(stock=stock))
            added = stock - int(before or 0)
        if added:
            orders.tell(orders.stocked, sku=sku, added=added)
    customers = 0
    if demo_customers:
        for name, public, token in DEMO_CUSTOMERS:
            result = db.session.execute(
                insert_ignoring_conflicts(Customer, db.session)
                .values(public_id=public, name=name, token_hash=hash_token(token), created_at=utcnow())
                .returning(Customer.id)
            )
            customers += len(result.all())
    return {"products": products, "customers": customers}
