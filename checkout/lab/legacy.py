"""Paying through a gateway that ignores keys (``POST /api/lab/legacy-gateway/orders``).

The shop's side is the safe checkout (the key claimed in the database, the
order in the claim's transaction, leases, recovery points, stored answers),
but the gateway's legacy interface (checkout.gateway.legacy) takes no key:
every call charges. So the shop cannot lean on "ask again with the same key".
Before any retry of the charge (a resumed payment: the gateway was down, its
answer was lost, a worker died) it asks the gateway for the charges made for
the order's reference, and uses the one it finds. Only when there is none
does it charge.

What is left uncovered, and what the reconciliation report
(checkout.shop.reconciliation_report) is for: a worker stalled past its lease
inside the call may still charge after another one looked and found nothing.
No fence can stop that at a gateway without keys; the report finds it.

Its deliberately wrong twin, ``POST /api/lab/legacy-gateway/no-lookup/orders``,
retries the charge without the lookup: a lost answer (card 0259) then costs a
second charge, and the damage table and the report show it.
"""

from __future__ import annotations

import enum

from flask import Blueprint, Flask, Response, current_app

from checkout.extensions import csrf
from checkout.gateway import CardDeclined, GatewayTimeout, GatewayUnavailable
from checkout.gateway.legacy import LegacyGateway
from checkout.idempotency import Operation, RetryLater, Scope, run
from checkout.lab import lab_only
from checkout.lab.api_twins import AskedOrder, PlaceLabOrder, read_order
from checkout.shop.api import answer, preferred_wait
from checkout.shop.models import PENDING
from checkout.shop.placement import ALREADY_FINAL, GatewayAnswer, OrderRequest, PaymentEvent
from checkout.shop.responders import ApiResponder
from checkout.shop.runtime import gateway, idempotency_settings

bp = lab_only(Blueprint("legacy_gateway", __name__))
csrf.exempt(bp)  # bearer tokens, like the API

LEGACY_PATH = "legacy-gateway"
NO_LOOKUP_PATH = "legacy-gateway:no-lookup"
LEGACY_ENDPOINT = "POST /api/lab/legacy-gateway/orders"
NO_LOOKUP_ENDPOINT = "POST /api/lab/legacy-gateway/no-lookup/orders"


class LegacyEvent(enum.StrEnum):
    LOOKED_UP = "looked_up"  # before a retry: what the gateway had for the order's reference


def legacy_gateway(app: Flask | None = None) -> LegacyGateway:
    """The gateway's legacy interface, made once per app with the keyed interface's settings."""
    app = app or current_app
    found = app.extensions.get("checkout.legacy_gateway")
    if found is None:
        keyed = app.extensions["checkout.gateway"]
        found = LegacyGateway(
            keyed.engine,
            slow_seconds=keyed.slow_seconds,
            very_slow_seconds=keyed.very_slow_seconds,
            timeout_seconds=keyed.timeout_seconds,
        )
        app.extensions["checkout.legacy_gateway"] = found
    assert isinstance(found, LegacyGateway)
    return found


class PayThroughLegacyGateway(PlaceLabOrder):
    """The payment's phases with the charge made through the legacy interface.

    ``look_up_first`` is the defence: before any retry of the charge, ask the
    gateway for the charges of the order's reference. The twin turns it off.
    """

    def __init__(self, request: OrderRequest, legacy: LegacyGateway, *, look_up_first: bool = True) -> None:
        super().__init__(request, ApiResponder(), gateway())
        self.legacy = legacy
        self.look_up_first = look_up_first
        self.path = LEGACY_PATH if look_up_first else NO_LOOKUP_PATH

    def charge(self, operation: Operation) -> GatewayAnswer:
        order = self._order(operation)
        if order.status != PENDING:
            return ALREADY_FINAL  # finished meanwhile (by another retry)
        # A resumed payment may have charged already (its answer lost, its worker dead): a gateway without
        # keys would charge again, so ask it first. A first attempt created its order a moment ago: nothing to find.
        if operation.resumed and self.look_up_first:
            earlier = self.legacy.find_by_reference(order.public_id)
            found = next((c for c in earlier if c.succeeded), earlier[-1] if earlier else None)
            operation.note(
                LegacyEvent.LOOKED_UP,
                order_id=order.public_id,
                found=found.id if found else None,
                status=found.status if found else None,
            )
            if found is not None:
                return GatewayAnswer.of(found)
        try:
            charge = self.legacy.charge(
                amount_cents=order.total_cents,
                currency=order.currency,
                card_number=self.request.card_number,
                reference=order.public_id,
            )
        except CardDeclined as declined:
            return GatewayAnswer.of(declined.charge)
        except GatewayUnavailable as unavailable:
            raise RetryLater(
                "the payment gateway is unavailable; nothing was charged",
                event=PaymentEvent.GATEWAY_UNAVAILABLE,
                order_id=order.public_id,
            ) from unavailable
        except GatewayTimeout as timeout:
            raise RetryLater(
                "the payment gateway did not answer in time",
                event=PaymentEvent.ANSWER_LOST,
                order_id=order.public_id,
            ) from timeout
        return GatewayAnswer.of(charge)


def _place(asked: AskedOrder, endpoint: str, *, look_up_first: bool) -> Response:
    wait = preferred_wait()
    outcome = run(
        Scope(asked.customer.public_id, endpoint, asked.key),
        asked.fingerprint(endpoint),
        PayThroughLegacyGateway(asked.order_request(), legacy_gateway(), look_up_first=look_up_first).phases(),
        settings=idempotency_settings(),
        wait_seconds=wait,
    )
    response = answer(outcome, asked.key)
    if wait:
        response.headers["Preference-Applied"] = f"wait={wait}"
    return response


@bp.post("/api/lab/legacy-gateway/orders")
def create_order() -> Response:
    """POST /api/orders, paid through the legacy gateway; the charge is looked up by reference before any retry."""
    asked = read_order()
    if isinstance(asked, Response):
        return asked
    return _place(asked, LEGACY_ENDPOINT, look_up_first=True)


@bp.post("/api/lab/legacy-gateway/no-lookup/orders")
def create_order_without_lookup() -> Response:
    """DELIBERATELY WRONG, for the workshop: the same, but a retry charges again without looking first."""
    asked = read_order()
    if isinstance(asked, Response):
        return asked
    return _place(asked, NO_LOOKUP_ENDPOINT, look_up_first=False)
