"""Who is asking: an anonymous customer per browser session, or an API token."""

from __future__ import annotations

import sqlalchemy as sa
from flask import request, session

from checkout.database import insert_ignoring_conflicts, utcnow
from checkout.extensions import db
from checkout.shop.models import Customer, hash_token, public_id

SESSION_CUSTOMER = "customer"


def ensure_browser_identity() -> str:
    """Give the session its customer id on the first visit (the row comes with the first write)."""
    customer_id = session.get(SESSION_CUSTOMER)
    if not customer_id:
        customer_id = public_id("cus")
        session[SESSION_CUSTOMER] = customer_id
    return str(customer_id)


def _customer(public_id: str) -> Customer | None:
    customer = db.session.scalars(sa.select(Customer).where(Customer.public_id == public_id)).first()
    db.session.commit()
    return customer


def browser_customer() -> Customer:
    """The session's customer row, created atomically the first time it is needed."""
    customer_public_id = ensure_browser_identity()
    customer = _customer(customer_public_id)
    if customer is None:
        db.session.execute(
            insert_ignoring_conflicts(Customer, db.session).values(public_id=customer_public_id, created_at=utcnow())
        )
        customer = _customer(customer_public_id)  # ours, or a racing request's: the same row
        assert customer is not None
    return customer


def known_browser_customer() -> Customer | None:
    """The session's customer if it has ever written anything, without creating one."""
    customer_public_id = session.get(SESSION_CUSTOMER)
    return _customer(str(customer_public_id)) if customer_public_id else None


def api_customer() -> Customer | None:
    """The customer whose bearer token the request carries, if any."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    customer = db.session.scalars(sa.select(Customer).where(Customer.token_hash == hash_token(token.strip()))).first()
    db.session.commit()
    return customer
