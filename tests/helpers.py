"""Helpers the tests share: reading the ledger, and the fields of a form."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from typing import Any

import sqlalchemy as sa
from flask import Flask

from checkout.extensions import db
from checkout.gateway import GatewayCharge
from checkout.idempotency import IdempotencyEvent, IdempotencyRecord
from checkout.shop.models import Order

ALICE = {"Authorization": "Bearer demo-alice-token"}
BOB = {"Authorization": "Bearer demo-bob-token"}
GOOD_CARD = "4242 4242 4242 4242"
DECLINED_CARD = "4000 0000 0000 0002"
UNAVAILABLE_CARD = "4000 0000 0000 0119"
ANSWER_LOST_CARD = "4000 0000 0000 0259"
SLOW_CARD = "4000 0000 0000 0077"


def order_body(card: str = GOOD_CARD, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "items": [{"sku": "MUG-01", "quantity": 2}, {"sku": "STK-01", "quantity": 1}],
        "email": "alice@example.com",
        "card_number": card,
    }
    body.update(changes)
    return body


class Ledger:
    """What the database holds, read in a fresh transaction each time."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def _all(self, model: Any, *where: Any) -> list[Any]:
        with self.app.app_context():
            rows = list(db.session.scalars(sa.select(model).where(*where)))
            db.session.commit()  # keeps the rows loaded after the session ends
            return rows

    def orders(self, *where: Any) -> list[Order]:
        return self._all(Order, *where)

    def charges(self, *where: Any) -> list[GatewayCharge]:
        return self._all(GatewayCharge, *where)

    def succeeded_charges(self) -> list[GatewayCharge]:
        return self.charges(GatewayCharge.status == "succeeded")

    def records(self, *where: Any) -> list[IdempotencyRecord]:
        return self._all(IdempotencyRecord, *where)

    def events(self, *where: Any) -> list[str]:
        return [e.name for e in sorted(self._all(IdempotencyEvent, *where), key=lambda e: e.id)]


class _FormParser(HTMLParser):
    def __init__(self, form_id: str | None) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "form" and (self.form_id is None or attributes.get("id") == self.form_id):
            self.inside = True
        elif tag == "input" and self.inside and attributes.get("name"):
            self.fields[attributes["name"] or ""] = attributes.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def form_fields(html: str, form_id: str | None = "checkout-form") -> dict[str, str]:
    parser = _FormParser(form_id)
    parser.feed(html)
    return parser.fields


def wait_for(condition: Callable[[], Any], timeout: float = 20) -> Any:
    """Poll until ``condition`` holds: tests synchronise on what the database shows, not on time."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        pause.wait(0.02)
    raise AssertionError("the condition never held")


def race(count: int, call: Callable[[int], Any]) -> list[Any]:
    """Start ``count`` calls at the same instant (a barrier, not a sleep); their results in order."""
    barrier = threading.Barrier(count)

    def one(index: int) -> Any:
        barrier.wait()
        return call(index)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))
