"""What every wrong twin shares with the safe checkout, so that each twin's module shows only its mistake.

- ``read_attempt``: the request, read exactly as ``POST /api/orders`` reads it
  (401, 400, 415, 422 problem+json, in the same order) before any twin runs;
- ``create_order``, ``charge`` and ``pay``: the safe path's own steps. The
  order (its stock taken) in one transaction, the gateway with no transaction
  open under the order's own gateway key, then the outcome (its email, or its
  stock given back) in one transaction. The order is marked ``mistake:<name>``
  so the lab's damage table counts each twin on its own row, and it carries no
  idempotency key: the twins keep theirs in their own stores, so the orders'
  unique (customer, key), the safe path's last backstop, cannot rescue them;
- the key stores' rows (``KeyRow``), and the answers: the stored answer
  replayed, 409 in progress, 422 for another body, 503.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import Any, Protocol

import sqlalchemy as sa
from flask import Response

from checkout.database import Base, insert_ignoring_conflicts, table_of, utcnow
from checkout.extensions import db
from checkout.gateway import CardDeclined, GatewayError
from checkout.idempotency import StoredResponse
from checkout.idempotency.audit import worker_name
from checkout.lab.api_twins import read_order
from checkout.lab.mistakes.models import MistakeKey
from checkout.problems import problem
from checkout.shop import orders, stock
from checkout.shop.models import DECLINED, PAID, PENDING, public_id
from checkout.shop.orders import OrderView
from checkout.shop.outcomes import end_order
from checkout.shop.placement import answer_for, gateway_key_for
from checkout.shop.responders import ApiResponder
from checkout.shop.runtime import gateway
from checkout.shop.validation import ValidOrder, price
from checkout.transactions import writing

RESPOND = ApiResponder()  # the safe endpoint's answers, byte for byte
ORDERS, ORDER_ITEMS = orders.orders, orders.order_items
WORKER_HEADER = "Lab-Worker"  # which process answered: in memory-store, that is the whole story


def path_of(mistake: str) -> str:
    """The twin's value of ``orders.path``: what the damage table groups its money by."""
    return f"mistake:{mistake}"


def endpoint_of(mistake: str) -> str:
    return f"POST /api/lab/mistakes/{mistake}/orders"


@dataclass(frozen=True)
class Attempt:
    """One request to a twin, read and validated as the safe endpoint reads it."""

    mistake: str
    customer_id: int
    customer: str  # the customer's public id: what a key belongs to
    key: str  # "" for the twin that reads no key
    order: ValidOrder
    fingerprint: str  # the HMAC of the normalized body, as the safe path computes it


class PaymentUnconfirmed(Exception):
    """The gateway was down, or its answer was lost: the outcome is not known (503)."""

    def __init__(self, reason: str, order_id: str) -> None:
        super().__init__(reason)
        self.order_id = order_id


def read_attempt(mistake: str, *, takes_key: bool) -> Attempt | Response:
    """The request as an Attempt, or the problem the safe endpoint would answer (nothing is stored)."""
    asked = read_order(takes_key=takes_key)  # 401, 400, 415, 422: the safe endpoint's own reading
    if isinstance(asked, Response):
        return asked
    priced, errors = price(asked.parsed.items)  # the twins place an order on every call: priced now
    if priced is None:
        return problem(422, "Invalid order", "Some fields are invalid.", errors=errors)
    valid = ValidOrder(asked.parsed, priced)
    return Attempt(
        mistake, asked.customer.id, asked.customer.public_id, asked.key, valid, asked.fingerprint(endpoint_of(mistake))
    )


# --- the key stores' rows ----------------------------------------------------------


class Record(Protocol):
    """A key a twin remembers (a row of one of its tables, or an entry in a worker's memory)."""

    @property
    def fingerprint(self) -> str | None: ...

    @property
    def order_id(self) -> str | None: ...

    @property
    def response(self) -> StoredResponse | None: ...

    def keep_order(self, order_id: str) -> None: ...

    def keep_response(self, response: StoredResponse) -> None: ...


@dataclass
class KeyRow:
    """A row of a twin's key table, copied out of its transaction (nothing reloads behind our back)."""

    table: sa.Table
    id: int
    customer: str
    fingerprint: str | None
    order_id: str | None
    response: StoredResponse | None = field(default=None)

    def keep_order(self, order_id: str) -> None:
        """Point the key at its order, in the caller's unit of work (the order's own transaction)."""
        db.session.execute(sa.update(self.table).where(self.table.c.id == self.id).values(order_id=order_id))
        self.order_id = order_id

    def keep_response(self, response: StoredResponse) -> None:
        """Store the answer, in the caller's unit of work (the transaction of the order's outcome)."""
        db.session.execute(
            sa.update(self.table)
            .where(self.table.c.id == self.id)
            .values(response_status=response.status, response_headers=response.headers, response_body=response.body)
        )
        self.response = response


def _row(table: sa.Table, row: Any) -> KeyRow:
    response = None
    if row.response_status is not None:
        response = StoredResponse(row.response_status, dict(row.response_headers or {}), row.response_body or b"")
    return KeyRow(table, row.id, row.customer, row.fingerprint, row.order_id, response)


def find(model: type[Base], **where: str) -> KeyRow | None:
    """The first row of ``model`` that matches ``where`` (a plain SELECT: it locks nothing)."""
    table = table_of(model)
    query = sa.select(table).where(*(table.c[name] == value for name, value in where.items())).order_by(table.c.id)
    row = db.session.execute(query).first()
    return _row(table, row) if row is not None else None


def insert(model: type[Base], **values: Any) -> KeyRow:
    """A plain INSERT of a key row: it succeeds as often as it is asked, unless a constraint refuses it."""
    table = table_of(model)
    with writing() as session:
        row = session.execute(sa.insert(table).values(created_at=utcnow(), **values).returning(table)).one()
    return _row(table, row)


def claim(model: type[Base], *, match: tuple[str, ...], **values: Any) -> tuple[KeyRow, bool]:
    """INSERT ... ON CONFLICT DO NOTHING: the row, and whether this request inserted it.

    What counts as "the same key" is the table's unique constraint; ``match``
    names its columns, to read the row that won when this insert did not.
    """
    table = table_of(model)
    with writing() as session:
        inserted = session.execute(
            insert_ignoring_conflicts(table, session).values(created_at=utcnow(), **values).returning(table)
        ).first()
        if inserted is not None:
            return _row(table, inserted), True
        existing = session.execute(sa.select(table).where(*(table.c[name] == values[name] for name in match))).one()
    return _row(table, existing), False


def claim_key(attempt: Attempt, **kept: Any) -> tuple[KeyRow, bool]:
    """Claim the attempt's key in the twins' shared store (one row per twin, customer and key), with what
    the twin keeps beside it (``fingerprint=``, the answer's ``response_*``): ``claim`` on ``MistakeKey``."""
    return claim(
        MistakeKey,
        match=("mistake", "customer", "key"),
        mistake=attempt.mistake,
        customer=attempt.customer,
        key=attempt.key,
        **kept,
    )


def find_key(attempt: Attempt) -> KeyRow | None:
    """The attempt's key in the twins' shared store, if anyone wrote it."""
    return find(MistakeKey, mistake=attempt.mistake, customer=attempt.customer, key=attempt.key)


def delete(row: KeyRow) -> None:
    with writing() as session:
        session.execute(sa.delete(row.table).where(row.table.c.id == row.id))


def same_request(record: Record, attempt: Attempt) -> bool:
    """The fingerprint check: is this the request the key was first used for?"""
    return record.fingerprint is None or hmac.compare_digest(record.fingerprint, attempt.fingerprint)


# --- the work: the safe path's own steps ------------------------------------------------


def load(order_id: str) -> OrderView:
    order = orders.by_public_id(order_id)
    if order is None:
        raise LookupError(f"no order {order_id}")  # only for an order this request made or has just read
    return order


def create_order(
    attempt: Attempt, record: Record | None = None, *, gateway_key: str | None = None
) -> OrderView | StoredResponse:
    """The pending order, its stock taken, in one transaction (``record`` learns its id in that same one).

    Not enough stock is a final answer, like the safe path's (stored in ``record``).
    """
    valid = attempt.order
    with writing() as session:
        short = stock.take(valid.lines)
        if short:
            answer = RESPOND.out_of_stock(short)
            if record is not None:
                record.keep_response(answer)
            return answer
        order_id = public_id("ord")
        now = utcnow()
        row_id = session.execute(
            sa.insert(ORDERS)
            .values(
                public_id=order_id,
                customer_id=attempt.customer_id,
                idempotency_key=None,  # the twin keeps its key in its own store
                gateway_key=gateway_key or gateway_key_for(order_id),
                status=PENDING,
                email=valid.email,
                card_last4=valid.card_number[-4:],
                total_cents=sum(line.total_cents for line in valid.lines),
                currency=valid.currency,
                refunded_cents=0,
                cart_moved_on=False,
                path=path_of(attempt.mistake),
                purchase_ref=valid.order.purchase,
                created_at=now,
                updated_at=now,
            )
            .returning(ORDERS.c.id)
        ).scalar_one()
        session.execute(
            sa.insert(ORDER_ITEMS),
            [
                {
                    "order_id": row_id,
                    "sku": line.sku,
                    "name": line.name,
                    "quantity": line.quantity,
                    "unit_price_cents": line.unit_price_cents,
                }
                for line in valid.lines
            ],
        )
        if record is not None:
            record.keep_order(order_id)
        return load(order_id)


def charge(attempt: Attempt, order: OrderView, record: Record | None = None) -> StoredResponse:
    """Ask the gateway (no transaction open) under the order's gateway key, then end the order in one
    transaction (``record`` keeps the answer in that same one). Raises PaymentUnconfirmed for a 503."""
    db.session.commit()  # end any read still open: nothing may wait on us while the gateway works
    outcome: tuple[str, str] | None = None  # None: the order was finished meanwhile
    if order.status == PENDING:
        try:
            charged = gateway().charge(
                gateway_key=order.gateway_key,
                amount_cents=order.total_cents,
                currency=order.currency,
                card_number=attempt.order.card_number,
                reference=order.public_id,
            )
            outcome = PAID, charged.id
        except CardDeclined as declined:
            outcome = DECLINED, declined.charge.id
        except GatewayError as error:  # down, or the answer was lost: the charge may exist
            raise PaymentUnconfirmed(str(error), order.public_id) from error
    with writing():
        ended = end_order(order, *outcome) if outcome is not None else None
        answer = answer_for(ended or load(order.public_id), RESPOND)
        if record is not None:
            record.keep_response(answer)
    return answer


def pay(attempt: Attempt, record: Record | None = None) -> StoredResponse:
    """The whole job, once: the order, then its charge (``record`` learns the order, then keeps the answer)."""
    made = create_order(attempt, record)
    if isinstance(made, StoredResponse):
        return made
    return charge(attempt, made, record)


# --- the answers ------------------------------------------------------------------------


def send(answer: StoredResponse, *, replayed: bool = False) -> Response:
    response = Response(answer.body, status=answer.status)
    for name, value in answer.headers.items():
        response.headers[name] = value
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


def replay(record: Record) -> Response:
    assert record.response is not None
    return send(record.response, replayed=True)


def in_progress(attempt: Attempt) -> Response:
    return problem(
        409,
        "Request in progress",
        "A request with this Idempotency-Key is still being processed; retry later.",
        type_="idempotency-request-in-progress",
        headers={"Retry-After": "1"},
        idempotency_key=attempt.key,
    )


def mismatch() -> Response:
    return problem(
        422,
        "Idempotency-Key reused",
        "This Idempotency-Key was used with a different request; use a new key.",
        type_="idempotency-key-reused",
    )


def unconfirmed(error: PaymentUnconfirmed, key: str) -> Response:
    return problem(
        503,
        "Payment not confirmed yet",
        f"{error}. Retry with the same Idempotency-Key.",
        type_="payment-unconfirmed",
        headers={"Retry-After": "1"},
        idempotency_key=key or None,
        order_id=error.order_id,
    )


def answer_seen(record: Record, attempt: Attempt) -> Response:
    """What a key store answers for a key it already has (the bodies, if it compares them, already compared):
    the stored answer; 409 while its order is still being made; else that order, charged again under its own
    gateway key, which can never charge twice (an earlier attempt met a gateway fault, or is still at it)."""
    if record.response is not None:
        return replay(record)
    order = orders.by_public_id(record.order_id) if record.order_id is not None else None
    if order is None:
        return in_progress(attempt)
    return send(charge(attempt, order, record))


def with_worker(response: Response) -> Response:
    """Say which process answered (host:pid): with several workers, each twin answer shows where it ran."""
    response.headers[WORKER_HEADER] = worker_name()
    return response
