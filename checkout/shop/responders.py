"""What each endpoint answers for an order's outcome. The answer is stored with
the idempotency record and replayed, so it is built from the order alone
(no request needed: ``reconcile`` builds it from the command line)."""

from __future__ import annotations

from typing import Protocol

from checkout.idempotency import StoredResponse
from checkout.problems import json_bytes, problem
from checkout.shop.models import Order

API_ENDPOINT = "POST /api/orders"
BROWSER_ENDPOINT = "POST /checkout"
# The browser endpoint's stored answers say which outcome they are, for the page to word it.
OUTCOME_HEADER = "X-Checkout-Outcome"


class Responder(Protocol):
    def paid(self, order: Order) -> StoredResponse: ...

    def declined(self, order: Order) -> StoredResponse: ...

    def abandoned(self, order: Order) -> StoredResponse: ...


class ApiResponder:
    """JSON, stored byte for byte and replayed as it is."""

    def paid(self, order: Order) -> StoredResponse:
        return StoredResponse(
            201,
            {"Content-Type": "application/json", "Location": f"/api/orders/{order.public_id}"},
            json_bytes(order.to_json()),
        )

    def declined(self, order: Order) -> StoredResponse:
        return self._problem(
            402, "Card declined", "The card was declined. Nothing was charged.", "card-declined", order
        )

    def abandoned(self, order: Order) -> StoredResponse:
        return self._problem(
            402,
            "Payment not completed",
            "This payment was abandoned before the gateway charged it, and nothing was "
            "charged. Place the order again with a new Idempotency-Key.",
            "payment-abandoned",
            order,
        )

    @staticmethod
    def _problem(status: int, title: str, detail: str, type_: str, order: Order) -> StoredResponse:
        body = problem(status, title, detail, type_=type_, order_id=order.public_id).get_data()
        return StoredResponse(status, {"Content-Type": "application/problem+json"}, body)


class BrowserResponder:
    """Where the order is; the checkout view renders the page from it."""

    def paid(self, order: Order) -> StoredResponse:
        return StoredResponse(303, {"Location": f"/orders/{order.public_id}", OUTCOME_HEADER: "paid"})

    def declined(self, order: Order) -> StoredResponse:
        return StoredResponse(402, {"Location": f"/orders/{order.public_id}", OUTCOME_HEADER: "declined"})

    def abandoned(self, order: Order) -> StoredResponse:
        return StoredResponse(402, {"Location": f"/orders/{order.public_id}", OUTCOME_HEADER: "abandoned"})


RESPONDERS: dict[str, Responder] = {API_ENDPOINT: ApiResponder(), BROWSER_ENDPOINT: BrowserResponder()}
