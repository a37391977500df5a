"""Reconcile never decides "not charged" while a charge can still land.

A worker stalls inside the gateway call (a stopped process, a long pause); its
lease runs out; reconcile takes the payment over. Before deciding, reconcile
fences the gateway key (the gateway voids it), and decides from whichever of
the void and the charge won. The stalled worker's late charge is then refused,
or, if it charged first, reconcile finds the charge and the order is paid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskCliRunner

from checkout import create_app
from tests.conftest import POSTGRES_URL
from tests.helpers import (
    ALICE,
    SLOW_CARD,
    Ledger,
    abandoned_unpaid_order,
    order_body,
    reconcile_the_abandoned,
    wait_for,
)
from tests.http import post_json
from tests.servers import gunicorn

BACKEND = "postgresql" if POSTGRES_URL else "sqlite"


def assert_paid_if_and_only_if_one_succeeded_charge(ledger: Ledger) -> None:
    """Invariant 4, for every order in the ledger."""
    succeeded = [c.reference for c in ledger.succeeded_charges()]
    for order in ledger.orders():
        paid = order.status in ("paid", "partially_refunded", "refunded")
        assert paid == (succeeded.count(order.public_id) == 1), (order.public_id, order.status, succeeded)


@pytest.mark.server
@pytest.mark.slow
@pytest.mark.parametrize("moment", ["before it charged", "after it charged"])
def test_a_worker_stopped_inside_the_gateway_call_never_leaves_a_failed_order_beside_a_charge(
    app: Flask, database_url: str, tmp_path: Path, ledger: Ledger, runner: FlaskCliRunner, moment: str
) -> None:
    key = str(uuid.uuid4())
    answers: list[int] = []
    # The slow card spends half its delay before charging and half after: room to stop the worker on either side.
    with gunicorn(database_url, tmp_path, settings={"CHECKOUT_SLOW_CARD_SECONDS": "4"}) as [server]:

        def pay() -> None:
            with contextlib.suppress(OSError):
                answers.append(
                    post_json(
                        f"{server.url}/api/orders", order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": key}
                    ).status
                )

        client = threading.Thread(target=pay, daemon=True)
        client.start()
        pid = wait_for(lambda: ledger.worker_of("gateway_called"))
        if moment == "after it charged":
            wait_for(ledger.charges)
        os.kill(pid, signal.SIGSTOP)  # the worker stalls inside the gateway call
        try:
            charged_at_the_stop = len(ledger.charges())
            output = reconcile_the_abandoned(app, runner)  # its lease runs out while it is stopped
        finally:
            os.kill(pid, signal.SIGCONT)  # ... and it wakes up
        client.join(timeout=30)
        retry = post_json(f"{server.url}/api/orders", order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": key})

    print(f"[{BACKEND}] stopped {moment}: charges at the stop={charged_at_the_stop}; reconcile: {output.strip()}")
    assert charged_at_the_stop == (1 if moment == "after it charged" else 0)
    assert_paid_if_and_only_if_one_succeeded_charge(ledger)
    [order] = ledger.orders()
    if moment == "before it charged":
        assert order.status == "failed"
        assert ledger.succeeded_charges() == []
        assert (retry.status, retry.json()["type"]) == (402, "payment-abandoned")
    else:
        assert order.status == "paid"
        assert len(ledger.succeeded_charges()) == 1
        assert retry.status == 201 and retry.json()["status"] == "paid"


def test_reconcile_fences_the_gateway_key_so_a_late_charge_under_it_is_refused(
    app: Flask, client: Any, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    from checkout.gateway import GatewayError
    from checkout.shop.payment import gateway
    from tests.helpers import UNAVAILABLE_CARD

    abandoned_unpaid_order(app, client, runner)
    [order] = ledger.orders()
    with app.app_context(), pytest.raises(GatewayError):
        # The call a stalled worker would make once it wakes up: same key, same amount.
        gateway().charge(
            gateway_key=order.gateway_key,
            amount_cents=order.total_cents,
            currency=order.currency,
            card_number=UNAVAILABLE_CARD,
            reference=order.public_id,
        )
    assert ledger.succeeded_charges() == []
    assert_paid_if_and_only_if_one_succeeded_charge(ledger)


@pytest.mark.parametrize(
    "settings",
    [
        {"CHECKOUT_LEASE_SECONDS": "2", "CHECKOUT_SLOW_CARD_SECONDS": "8"},
        {"CHECKOUT_LEASE_SECONDS": "10", "CHECKOUT_GATEWAY_TIMEOUT_SECONDS": "10"},
    ],
)
def test_a_lease_not_longer_than_the_gateway_timeout_plus_the_slow_card_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, settings: dict[str, str]
) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match="CHECKOUT_LEASE_SECONDS"):
        create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db", "SECRET_KEY": "k" * 32})
