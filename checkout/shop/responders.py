"""What each endpoint answers for an order's outcome. The answer is stored with the idempotency
record and replayed, so it is built from the order alone (``reconcile`` builds it from the
command line, with no request at all)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from checkout.i18n import N_
from checkout.idempotency import StoredResponse
from checkout.problems import json_bytes, problem
from checkout.shop.orders import OrderView

API_ENDPOINT = "POST /api/orders"
BROWSER_ENDPOINT = "POST /checkout"


class Responder(Protocol):
    def paid(self, order: OrderView) -> StoredResponse: ...

    def declined(self, order: OrderView) -> StoredResponse: ...

    def abandoned(self, order: OrderView) -> StoredResponse: ...

    def out_of_date(self, reason: str) -> StoredResponse: ...

    def in_progress(self, order: OrderView) -> StoredResponse: ...

    def invalid(self, errors: dict[str, list[str]]) -> StoredResponse: ...

    def out_of_stock(self, skus: list[str]) -> StoredResponse: ...


class ApiResponder:
    """JSON, stored byte for byte and replayed as it is."""

    def paid(self, order: OrderView) -> StoredResponse:
        return StoredResponse(
            201,
            {"Content-Type": "application/json", "Location": f"/api/orders/{order.public_id}"},
            json_bytes(order.to_json()),
        )

    def declined(self, order: OrderView) -> StoredResponse:
        return self._problem(
            402,
            "Card declined",
            "The card was declined. Nothing was charged.",
            "card-declined",
            order_id=order.public_id,
        )

    def abandoned(self, order: OrderView) -> StoredResponse:
        return self._problem(
            402,
            "Payment not completed",
            "This payment was abandoned before the gateway charged it, and nothing was "
            "charged. Place the order again with a new Idempotency-Key.",
            "payment-abandoned",
            order_id=order.public_id,
        )

    def out_of_date(self, reason: str) -> StoredResponse:
        return self._problem(422, "Order out of date", reason, "order-out-of-date")

    def in_progress(self, order: OrderView) -> StoredResponse:
        answer = self._problem(
            409,
            "Request in progress",
            "Another request is placing this order right now; retry later.",
            "idempotency-request-in-progress",
            order_id=order.public_id,
        )
        return StoredResponse(answer.status, {**answer.headers, "Retry-After": "1"}, answer.body)

    def invalid(self, errors: dict[str, list[str]]) -> StoredResponse:
        return self._problem(422, "Invalid order", "Some fields are invalid.", "validation-error", errors=errors)

    def out_of_stock(self, skus: list[str]) -> StoredResponse:
        return self._problem(
            422,
            "Out of stock",
            "Not enough stock for: " + ", ".join(skus) + ". Nothing was charged.",
            "out-of-stock",
            skus=skus,
        )

    @staticmethod
    def _problem(status: int, title: str, detail: str, type_: str, **extra: Any) -> StoredResponse:
        response = problem(status, title, detail, type_=type_, **extra)
        return StoredResponse(status, {"Content-Type": "application/problem+json"}, response.get_data())


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


RESPONDERS: dict[str, Responder] = {API_ENDPOINT: ApiResponder(), BROWSER_ENDPOINT: BrowserResponder()}
