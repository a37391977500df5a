"""Compensation: a charge made for an order that ended unpaid is refunded once, under ``compensate-<charge id>``,
however often reconcile or ``flask gateway compensate`` runs, and even when one dies between the refund and its
record. A paid order's charge is never touched."""

from __future__ import annotations

import subprocess
from typing import Any

import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

from checkout.extensions import db
from checkout.gateway import Gateway, GatewayUnavailable, Refund
from checkout.gateway.models import GatewayRefund
from checkout.lab.compensation import stage_late_charge
from checkout.shop.compensation import REFUNDED, WAITING, Compensation, compensate_all, compensation_key, orphans
from checkout.shop.models import FAILED
from checkout.shop.payment import gateway
from checkout.shop.reconcile import reconcile
from tests.helpers import ALICE, Ledger, order_body
from tests.mailing import flask_here, flask_process


def stage(app: Flask) -> str:
    """An order ended failed, and the late charge a stalled worker made for it: the charge's id."""
    with app.app_context():
        order_id = stage_late_charge()
        [orphan] = orphans()
    assert orphan.order_id == order_id and orphan.order_status == FAILED
    return orphan.charge_id


def refunds(app: Flask) -> list[tuple[str, str, int]]:
    with app.app_context():
        rows = db.session.execute(
            sa.select(GatewayRefund.refund_key, GatewayRefund.charge_id, GatewayRefund.amount_cents)
        )
        return [tuple(row) for row in rows.all()]  # type: ignore[misc]


def compensations(app: Flask) -> list[str]:
    with app.app_context():
        return list(db.session.scalars(sa.select(Compensation.charge_id)))


def test_reconcile_refunds_an_orphan_charge_once_however_often_it_runs(app: Flask, ledger: Ledger) -> None:
    charge_id = stage(app)
    with app.app_context():
        first = [r for r in reconcile(gateway()) if r.endpoint == "compensation"]
        second = [r for r in reconcile(gateway()) if r.endpoint == "compensation"]
    assert [(r.key, r.outcome, r.charge_id) for r in first] == [(compensation_key(charge_id), REFUNDED, charge_id)]
    assert second == []  # recorded: nothing left to compensate
    [charge] = ledger.charges()
    assert refunds(app) == [(compensation_key(charge_id), charge_id, charge.amount_cents)]
    assert compensations(app) == [charge_id]


def test_compensate_killed_between_the_refund_and_its_record_refunds_once_when_run_again(
    app: Flask, database_url: str
) -> None:
    charge_id = stage(app)

    def compensate(*options: str) -> subprocess.CompletedProcess[str]:
        """A real process for the run that dies on purpose; the run after it in this process."""
        if options:
            return flask_process(app, database_url, "gateway", "compensate", *options)
        return flask_here(app, "gateway", "compensate")

    crashed = compensate("--crash-after-refund")
    assert crashed.returncode == 1 and "dying now, before recording it" in crashed.stderr
    assert len(refunds(app)) == 1 and compensations(app) == []  # refunded at the gateway, not recorded
    again = compensate()
    assert again.returncode == 0, again.stderr
    assert "compensated 1 orphan charge(s)" in again.stdout
    assert [charge for _key, charge, _amount in refunds(app)] == [charge_id]  # the gateway answered with the first
    assert compensations(app) == [charge_id]


def test_a_paid_orders_charge_is_never_compensated(client: FlaskClient, app: Flask, ledger: Ledger) -> None:
    answer = client.post(
        "/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": "compensation-test-0001"}
    )
    assert answer.status_code == 201
    with app.app_context():
        assert compensate_all(gateway()) == []
    assert len(ledger.succeeded_charges()) == 1 and refunds(app) == [] and compensations(app) == []


class DownForRefunds:
    """The shop's gateway, except that it is down for refunds until ``back()``."""

    def __init__(self, real: Gateway) -> None:
        self.real, self.down = real, True

    def refund(self, **asked: Any) -> Refund:
        if self.down:
            raise GatewayUnavailable("the gateway is down")
        return self.real.refund(**asked)


def test_an_orphan_waits_while_the_gateway_is_down_and_is_refunded_once_it_is_back(app: Flask) -> None:
    charge_id = stage(app)
    with app.app_context():
        flaky = DownForRefunds(gateway())
        waiting = compensate_all(flaky)  # type: ignore[arg-type]
        assert [c.outcome for c in waiting] == [WAITING] and compensations(app) == []
        flaky.down = False
        assert [c.outcome for c in compensate_all(flaky)] == [REFUNDED]  # type: ignore[arg-type]
    assert len(refunds(app)) == 1 and compensations(app) == [charge_id]
