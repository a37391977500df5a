"""Who is asking: an anonymous customer per browser session, or an API token; and whom a request counts
against for the rate limits (the token's customer, else the address: made-up tokens buy no budget)."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import sqlalchemy as sa
from flask import current_app, g, request, session
from flask_limiter.util import get_remote_address

from checkout.config import settings
from checkout.database import insert_ignoring_conflicts, public_id, table_of, utcnow
from checkout.extensions import db
from checkout.shop.models import Customer

SESSION_CUSTOMER = "customer"

log = logging.getLogger(__name__)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def identify_browser() -> None:
    """An anonymous customer per browser session, from the first visit (API clients use tokens)."""
    if (
        request.blueprint not in ("api", "webhooks", "metrics")  # a scraper is nobody's browser
        and request.endpoint != "static"
        and not request.path.startswith("/api/")
    ):
        browser_identity()


def browser_identity() -> str:
    """The session's customer id, given on the first visit (its row comes with the first write)."""
    customer_id = session.get(SESSION_CUSTOMER)
    if not isinstance(customer_id, str) or not customer_id:
        customer_id = public_id("cus")
        session[SESSION_CUSTOMER] = customer_id
    return customer_id


def known_browser_customer_id() -> int | None:
    """The row id of the session's customer, if it has ever written anything (a read)."""
    customer_public_id = session.get(SESSION_CUSTOMER)
    if not isinstance(customer_public_id, str):
        return None
    return db.session.scalar(sa.select(Customer.id).where(Customer.public_id == customer_public_id))


def browser_customer_id() -> int:
    """The row id of the session's customer, created the first time (call inside a unit of work)."""
    customer_public_id = browser_identity()
    db.session.execute(
        insert_ignoring_conflicts(Customer, db.session).values(public_id=customer_public_id, created_at=utcnow())
    )
    customer_id = db.session.scalar(sa.select(Customer.id).where(Customer.public_id == customer_public_id))
    assert customer_id is not None  # ours, or a racing request's: the same row
    return customer_id


@dataclass(frozen=True)
class ApiCustomer:
    id: int
    public_id: str


_customers = table_of(Customer)  # Core: a read of two columns needs no ORM entity
_BY_TOKEN = sa.select(_customers.c.id, _customers.c.public_id).where(_customers.c.token_hash == sa.bindparam("_hash"))


def bearer_token() -> str | None:
    """The token of the request's ``Authorization: Bearer`` header, if it has one."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


# On flask.g, with the request it is about: the rate limit looks the token up first and the view
# reuses it. An app context can outlive a request (a test may push one around several), so the
# answer is reused only for the request it was found for.
_LOOKED_UP = "checkout_api_customer"


def api_customer() -> ApiCustomer | None:
    """The customer whose bearer token the request carries, if any: one indexed read per request."""
    token = bearer_token()
    if token is None:
        return None
    this_request = request._get_current_object()  # type: ignore[attr-defined]
    looked_up: tuple[object, ApiCustomer | None] | None = g.get(_LOOKED_UP)
    if looked_up is not None and looked_up[0] is this_request:
        return looked_up[1]
    row = db.session.execute(_BY_TOKEN, {"_hash": hash_token(token)}).first()
    customer = ApiCustomer(row.id, row.public_id) if row is not None else None
    setattr(g, _LOOKED_UP, (this_request, customer))
    return customer


def client_key() -> str:
    """Whom a request counts against: the customer whose bearer token it carries, else its address."""
    customer = _token_holder() if bearer_token() is not None else None
    if customer is not None:
        return "customer:" + customer.public_id
    return "address:" + (get_remote_address() or "unknown")


# The blueprints whose views begin with the engine's look (or a unit of work): their request reads on in the token's
# transaction. An app with more of them sets app.extensions[READS_ON] to its own set.
READS_ON = "checkout.token_read_goes_on"
SHOP_READS_ON = frozenset({"api", "cart_api"})


def _token_holder() -> ApiCustomer | None:
    """The token's customer: one indexed read, kept for the view on flask.g.

    Where the limit counts in memory and the view begins with the engine's look (``READS_ON``), the read's
    transaction goes on as the request's own: the look reads on in it (on SQLite the claim's unit of work ends it
    and begins ``BEGIN IMMEDIATE``), and no ROLLBACK and BEGIN again come between. Elsewhere it ends here: the limit
    may count in Redis next, and another view may reach Redis, RabbitMQ or the gateway first, and nothing may wait
    with a transaction open. Flask-Limiter takes an exception here for its storage failing: a database that does
    not answer counts the request by its address, and the view meets the database's error itself.
    """
    current = db.session()  # not flask.session, the cookie
    already_open = current.in_transaction()
    try:
        return api_customer()
    except sa.exc.SQLAlchemyError as error:
        current.rollback()  # PostgreSQL refuses every statement after an error until then
        log.warning("rate limit: the token's customer could not be read (%s); counting by address", error)
        return None
    finally:
        reads_on = request.blueprint in current_app.extensions.get(READS_ON, SHOP_READS_ON)
        reads_on = reads_on and not settings().redis_url
        if not already_open and not reads_on:
            current.rollback()


def counts_against_nobody() -> bool:
    """Static files, and the gateway's signed webhooks (it retries on its own schedule), spend no budget."""
    return request.endpoint in ("static", "webhooks.receive")
