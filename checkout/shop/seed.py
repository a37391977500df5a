"""Demo data: the catalog, and the demo API customers in development."""

from __future__ import annotations

from checkout.database import insert_ignoring_conflicts, utcnow
from checkout.extensions import db
from checkout.shop.models import Customer, Product, hash_token

PRODUCTS = [
    ("MUG-01", "Idempotent Mug", "Pour twice, fill once.", "☕️", 1400),
    ("TEE-01", "Exactly-Once T-shirt", "Soft cotton, printed a single time.", "👕", 2400),
    ("STK-01", "Retry Sticker Pack", "Ten stickers; sticking one twice is safe.", "🏷️", 500),
    ("NOTE-01", "Ledger Notebook", "Append-only, dotted pages.", "📓", 1250),
    ("HOOD-01", "Lease Hoodie", "Warm until it expires.", "🧥", 4800),
    ("CAP-01", "UUIDv4 Cap", "One in 2^122 chance someone has the same.", "🧢", 1900),
    ("POST-01", "Two Generals Poster", "A classic about lost answers.", "🖼️", 1600),
    ("KEY-01", "Pay Keycap", "Press it as often as you like.", "⌨️", 900),
    ("SOCK-01", "At-Most-Once Socks", "A pair, never two.", "🧦", 1100),
    ("TOTE-01", "Recovery Point Tote", "Carries on from where you left off.", "👜", 1800),
    ("LAST-01", "Last-One Lamp", "Only one was ever made: two tabs can race for it.", "💡", 3200),
]

DEMO_CUSTOMERS = [("alice", "cus_demo_alice", "demo-alice-token"), ("bob", "cus_demo_bob", "demo-bob-token")]


def seed(*, demo_customers: bool) -> dict[str, int]:
    """Insert what is missing; running it twice changes nothing. (Call inside a unit of work.)"""
    products = 0
    for sku, name, description, emoji, price in PRODUCTS:
        result = db.session.execute(
            insert_ignoring_conflicts(Product, db.session)
            .values(sku=sku, name=name, description=description, emoji=emoji, price_cents=price, currency="USD")
            .returning(Product.id)
        )
        products += len(result.all())
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
