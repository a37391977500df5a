"""Paying through a gateway that ignores keys (``POST /api/lab/legacy-gateway/orders``), and the report that checks it.

Every call charges, so before any retry of the charge the shop asks the gateway for the order's charges and uses
the one it finds. A worker stalled past its lease may still charge after another found none: the report finds it.
Design: docs/design.md#checkoutlablegacypy-paying-through-a-gateway-without-keys
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from flask import Blueprint, Flask, Response, current_app, render_template

from checkout.extensions import csrf
from checkout.gateway.legacy import LegacyGateway
from checkout.idempotency import Operation
from checkout.lab import damage, lab_only
from checkout.lab.tables import variant
from checkout.shop import compensation
from checkout.shop.api import place_order, token_required
from checkout.shop.orders import OrderView
from checkout.shop.payment import SAFE, GatewayAnswer, GatewayCall, ask
from checkout.shop.reconciliation_report import KINDS, reconciliation_report

bp = lab_only(Blueprint("legacy_gateway", __name__))
csrf.exempt(bp)  # bearer tokens, like the API


class LegacyEvent(enum.StrEnum):
    LOOKED_UP = "looked_up"  # before a retry: what the gateway had for the order's reference


def legacy_gateway(app: Flask | None = None) -> LegacyGateway:
    """The gateway's legacy interface, made once per app with the keyed interface's settings."""
    app = app or current_app
    found = app.extensions.get("checkout.legacy_gateway")
    if found is None:
        keyed = app.extensions["checkout.gateway"]
        found = app.extensions["checkout.legacy_gateway"] = LegacyGateway(
            keyed.engine,
            slow_seconds=keyed.slow_seconds,
            very_slow_seconds=keyed.very_slow_seconds,
            timeout_seconds=keyed.timeout_seconds,
        )
    assert isinstance(found, LegacyGateway)
    return found


@dataclass(frozen=True)
class LegacyProvider:
    """The provider part, swapped: the gateway's legacy interface, which takes no key (every call charges).

    ``look_up_first`` is the defence: before any retry of the charge, ask the
    gateway for the charges of the order's reference. The wrong twin turns it off.
    """

    look_up_first: bool = True

    def charge(self, operation: Operation, order: OrderView, call: GatewayCall, card_number: str) -> GatewayAnswer:
        legacy = legacy_gateway()
        # A resumed payment may have charged already (its answer lost, its worker dead): a gateway without
        # keys would charge again, so ask it first. A first attempt created its order a moment ago: nothing to find.
        if operation.resumed and self.look_up_first:
            earlier = legacy.find_by_reference(call.reference)
            found = next((c for c in earlier if c.succeeded), earlier[-1] if earlier else None)
            operation.note(
                LegacyEvent.LOOKED_UP,
                order_id=order.public_id,
                found=found.id if found else None,
                status=found.status if found else None,
            )
            if found is not None:
                return GatewayAnswer.of(found)
        return ask(
            lambda: legacy.charge(
                amount_cents=order.total_cents,
                currency=order.currency,
                card_number=card_number,
                reference=call.reference,
            ),
            order_id=order.public_id,
        )


LEGACY = variant(SAFE, "legacy-gateway", endpoint="POST /api/lab/legacy-gateway/orders", provider=LegacyProvider())
NO_LOOKUP = variant(
    SAFE,
    "legacy-gateway:no-lookup",
    endpoint="POST /api/lab/legacy-gateway/no-lookup/orders",
    provider=LegacyProvider(look_up_first=False),
)
LEGACY_PATH, NO_LOOKUP_PATH = LEGACY.path, NO_LOOKUP.path


@bp.post("/api/lab/legacy-gateway/orders")
@token_required
def create_order() -> Response:
    """POST /api/orders, paid through the legacy gateway; the charge is looked up by reference before any retry."""
    return place_order(LEGACY)


@bp.post("/api/lab/legacy-gateway/no-lookup/orders")
@token_required
def create_order_without_lookup() -> Response:
    """DELIBERATELY WRONG, for the workshop: the same, but a retry charges again without looking first."""
    return place_order(NO_LOOKUP)


@bp.get("/lab/reconciliation")
def reconciliation() -> str:
    """The report of ``flask gateway reconcile-report``, beside the gateway it is for and its twin's damage."""
    report, totals = reconciliation_report(), damage.by_path()
    paths = [(twin.path, totals.get(twin.path)) for twin in (LEGACY, NO_LOOKUP)]
    return render_template(
        "lab/reconciliation.html",
        report=report,
        kinds=KINDS,
        legacy=LEGACY,
        no_lookup=NO_LOOKUP,
        paths=paths,
        orphans=compensation.orphans(),
        compensations=compensation.recent(),
    )
