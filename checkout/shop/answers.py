"""The answers a payment stores with its record and replays: built from the order alone, so a replay years later,
a retry and reconcile all say the same. problem+json for the API (``ApiResponder``), an outcome the checkout page
renders for the browser (``BrowserResponder``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from checkout.errors import problem
from checkout.i18n import N_
from checkout.idempotency import (
    StoredResponse,
    json_bytes,
)
from checkout.shop import schemas
from checkout.shop.orders import OrderView

# --- the answers: stored with the record and replayed, so built from the order alone ----------
# (reconcile builds them from the command line, with no request at all)


@dataclass(frozen=True)
class ProblemKind:
    """A kind of problem+json answer an endpoint stores with its record, byte for byte, and replays."""

    status: int
    title: str
    type: str
    come_back: bool = False  # not final: Retry-After says when the same key may learn more

    def stored(self, detail: str, retry_after: int = 1, /, **extra: Any) -> StoredResponse:
        body = problem(self.status, self.title, detail, type_=self.type, **extra).get_data()
        come_back = {"Retry-After": str(retry_after)} if self.come_back else {}
        return StoredResponse(self.status, {"Content-Type": "application/problem+json", **come_back}, body)


CARD_DECLINED = ProblemKind(402, "Card declined", "card-declined")
PAYMENT_ABANDONED = ProblemKind(402, "Payment not completed", "payment-abandoned")
IN_PROGRESS = ProblemKind(409, "Request in progress", "idempotency-request-in-progress", come_back=True)
OUT_OF_DATE = ProblemKind(422, "Order out of date", "order-out-of-date")
INVALID_ORDER = ProblemKind(422, "Invalid order", "validation-error")
OUT_OF_STOCK = ProblemKind(422, "Out of stock", "out-of-stock")


class Responder(Protocol):
    def paid(self, order: OrderView) -> StoredResponse: ...

    def declined(self, order: OrderView) -> StoredResponse: ...

    def abandoned(self, order: OrderView) -> StoredResponse: ...

    def out_of_date(self, reason: str) -> StoredResponse: ...

    def in_progress(self, order: OrderView) -> StoredResponse: ...

    def invalid(self, errors: dict[str, list[str]]) -> StoredResponse: ...

    def out_of_stock(self, skus: list[str]) -> StoredResponse: ...


@dataclass(frozen=True)
class ApiResponder:
    """JSON, stored byte for byte and replayed as it is; a 409 names the request's ``idempotency_key``."""

    key: str | None = None

    def paid(self, order: OrderView) -> StoredResponse:
        return StoredResponse(
            201,
            {"Content-Type": "application/json", "Location": f"/api/orders/{order.public_id}"},
            schemas.Order.of(order).to_bytes(),
        )

    def declined(self, order: OrderView) -> StoredResponse:
        return CARD_DECLINED.stored("The card was declined. Nothing was charged.", order_id=order.public_id)

    def abandoned(self, order: OrderView) -> StoredResponse:
        detail = (
            "This payment was abandoned before the gateway charged it, and nothing was "
            "charged. Place the order again with a new Idempotency-Key."
        )
        return PAYMENT_ABANDONED.stored(detail, order_id=order.public_id)

    def out_of_date(self, reason: str) -> StoredResponse:
        return OUT_OF_DATE.stored(reason)

    def in_progress(self, order: OrderView) -> StoredResponse:
        detail = "Another request is placing this order right now; retry later."
        return IN_PROGRESS.stored(detail, order_id=order.public_id, idempotency_key=self.key)

    def invalid(self, errors: dict[str, list[str]]) -> StoredResponse:
        return INVALID_ORDER.stored("Some fields are invalid.", errors=errors)

    def out_of_stock(self, skus: list[str]) -> StoredResponse:
        return OUT_OF_STOCK.stored("Not enough stock for: " + ", ".join(skus) + ". Nothing was charged.", skus=skus)


@dataclass(frozen=True)
class BrowserOutcome:
    """The browser endpoint stores what happened, typed; the checkout view renders the page from it."""

    outcome: str  # paid, declined, abandoned, out_of_stock, out_of_date, in_progress
    order_id: str | None = None
    key: str | None = None  # in_progress: the key of the operation that is placing the order
    reason: str | None = None
    skus: list[str] | None = None  # out_of_stock: what ran out

    @classmethod
    def from_stored(cls, response: StoredResponse) -> BrowserOutcome:
        return cls(**json.loads(response.body))

    def stored(self, status: int) -> StoredResponse:
        body = {name: value for name, value in self.__dict__.items() if value is not None}
        return StoredResponse(status, {"Content-Type": "application/json"}, json_bytes(body))

    @property
    def order_url(self) -> str | None:
        return f"/orders/{self.order_id}" if self.order_id else None


class BrowserResponder:
    def paid(self, order: OrderView) -> StoredResponse:
        return BrowserOutcome("paid", order.public_id).stored(303)

    def declined(self, order: OrderView) -> StoredResponse:
        return BrowserOutcome("declined", order.public_id).stored(402)

    def abandoned(self, order: OrderView) -> StoredResponse:
        return BrowserOutcome("abandoned", order.public_id).stored(402)

    def out_of_date(self, reason: str) -> StoredResponse:
        return BrowserOutcome("out_of_date", reason=reason).stored(422)

    def in_progress(self, order: OrderView) -> StoredResponse:
        return BrowserOutcome("in_progress", order.public_id, key=order.idempotency_key).stored(202)

    def invalid(self, errors: dict[str, list[str]]) -> StoredResponse:
        return BrowserOutcome("out_of_date", reason=N_("Something in your cart is no longer sold.")).stored(422)

    def out_of_stock(self, skus: list[str]) -> StoredResponse:
        return BrowserOutcome("out_of_stock", skus=skus).stored(422)
