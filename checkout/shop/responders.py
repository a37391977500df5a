"""What each endpoint answers for an order's (or a payment's) outcome. The answer is stored with the
idempotency record and replayed, so it is built from the order or payment alone (``reconcile``
builds it from the command line, with no request at all)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from checkout.i18n import N_
from checkout.idempotency import StoredResponse
from checkout.problems import json_bytes, problem
from checkout.shop.orders import OrderView

if TYPE_CHECKING:  # payments' phases use the engine's placement, which names these responders
    from checkout.shop.payments import PaymentView

API_ENDPOINT = "POST /api/orders"
BROWSER_ENDPOINT = "POST /checkout"
API_PAYMENTS = "POST /api/payments"


def stored_problem(status: int, title: str, detail: str, type_: str, **extra: Any) -> StoredResponse:
    """A problem+json answer as it is stored with a record, byte for byte."""
    response = problem(status, title, detail, type_=type_, **extra)
    return StoredResponse(status, {"Content-Type": "application/problem+json"}, response.get_data())


def key_reused() -> StoredResponse:
    """The key was first used with a different request (every idempotent endpoint of the API)."""
    return stored_problem(
        422,
        "Idempotency-Key reused",
        "This Idempotency-Key was used with a different request; use a new key.",
        "idempotency-key-reused",
    )


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
        return stored_problem(
            402,
            "Card declined",
            "The card was declined. Nothing was charged.",
            "card-declined",
            order_id=order.public_id,
        )

    def abandoned(self, order: OrderView) -> StoredResponse:
        return stored_problem(
            402,
            "Payment not completed",
            "This payment was abandoned before the gateway charged it, and nothing was "
            "charged. Place the order again with a new Idempotency-Key.",
            "payment-abandoned",
            order_id=order.public_id,
        )

    def out_of_date(self, reason: str) -> StoredResponse:
        return stored_problem(422, "Order out of date", reason, "order-out-of-date")

    def in_progress(self, order: OrderView) -> StoredResponse:
        answer = stored_problem(
            409,
            "Request in progress",
            "Another request is placing this order right now; retry later.",
            "idempotency-request-in-progress",
            order_id=order.public_id,
        )
        return StoredResponse(answer.status, {**answer.headers, "Retry-After": "1"}, answer.body)

    def invalid(self, errors: dict[str, list[str]]) -> StoredResponse:
        return stored_problem(422, "Invalid order", "Some fields are invalid.", "validation-error", errors=errors)

    def out_of_stock(self, skus: list[str]) -> StoredResponse:
        return stored_problem(
            422,
            "Out of stock",
            "Not enough stock for: " + ", ".join(skus) + ". Nothing was charged.",
            "out-of-stock",
            skus=skus,
        )


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


class ApiPaymentResponder:
    """POST /api/payments: JSON, stored byte for byte and replayed as it is.

    Problems name the payment as ``payment_id`` (as the 409 and 503 of the engine do) and the
    client's order reference as ``order_id``; ``order-already-paid`` also gives the existing
    payment as ``id``, the field a client reads from the payment itself.
    """

    def paid(self, payment: PaymentView) -> StoredResponse:
        return StoredResponse(
            201, {"Content-Type": "application/json", "Location": payment.location}, json_bytes(payment.to_json())
        )

    def declined(self, payment: PaymentView) -> StoredResponse:
        return stored_problem(
            402,
            "Card declined",
            "The card was declined. Nothing was charged; pay this order again with a new Idempotency-Key.",
            "card-declined",
            payment_id=payment.public_id,
            order_id=payment.order_ref,
        )

    def abandoned(self, payment: PaymentView) -> StoredResponse:
        return stored_problem(
            402,
            "Payment not completed",
            "This payment was abandoned before the gateway charged it, and nothing was charged. "
            "Pay this order again with a new Idempotency-Key.",
            "payment-abandoned",
            payment_id=payment.public_id,
            order_id=payment.order_ref,
        )

    def already_paid(self, payment: PaymentView) -> StoredResponse:
        return stored_problem(
            409,
            "Order already paid",
            f"Order {payment.order_ref} is already paid by payment {payment.public_id}: nothing was charged.",
            "order-already-paid",
            id=payment.public_id,
            payment_id=payment.public_id,
            order_id=payment.order_ref,
        )

    def paying_elsewhere(self, payment: PaymentView | None) -> StoredResponse:
        answer = stored_problem(
            409,
            "Order payment in progress",
            "Another request, with another Idempotency-Key, is paying this order right now. Nothing was "
            "charged under this key; retry later with the same key to learn whether the order got paid.",
            "order-payment-in-progress",
            payment_id=payment.public_id if payment else None,
            order_id=payment.order_ref if payment else None,
        )
        return StoredResponse(answer.status, {**answer.headers, "Retry-After": "1"}, answer.body)

    def in_progress(self, payment: PaymentView) -> StoredResponse:
        answer = stored_problem(
            409,
            "Request in progress",
            "A request with this Idempotency-Key is still paying this order; retry later.",
            "idempotency-request-in-progress",
            payment_id=payment.public_id,
            order_id=payment.order_ref,
        )
        return StoredResponse(answer.status, {**answer.headers, "Retry-After": "1"}, answer.body)

    def key_reused(self) -> StoredResponse:
        return key_reused()
