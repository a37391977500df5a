"""The reconciliation report (flask --app checkout gateway reconcile-report, /lab/reconciliation): the
shop's ledger against the gateway's, on a ledger with each kind of discrepancy planted."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.database import utcnow
from checkout.extensions import db
from checkout.gateway import GatewayCharge
from checkout.shop.models import Customer, Order
from checkout.shop.reconciliation_report import (
    AMOUNTS_DIFFER,
    CHARGE_WITHOUT_PAID_ORDER,
    PAID_WITHOUT_CHARGE,
    reconciliation_report,
)
from tests.helpers import ALICE, ANSWER_LOST_CARD, DECLINED_CARD, order_body


def plant_order(app: Flask, status: str, total_cents: int, charge_id: str | None, public_id: str) -> None:
    with app.app_context():
        customer = db.session.query(Customer).filter_by(name="alice").one()
        db.session.add(
            Order(
                public_id=public_id,
                customer_id=customer.id,
                idempotency_key=f"planted-{public_id}",
                gateway_key=f"charge-{public_id}",
                status=status,
                email="alice@example.com",
                card_last4="4242",
                total_cents=total_cents,
                currency="USD",
                charge_id=charge_id,
            )
        )
        db.session.commit()


def plant_charge(app: Flask, charge_id: str, reference: str, amount_cents: int, status: str = "succeeded") -> None:
    with app.app_context():
        db.session.add(
            GatewayCharge(
                id=charge_id,
                gateway_key=f"legacy-{secrets.token_hex(8)}",
                reference=reference,
                amount_cents=amount_cents,
                currency="USD",
                status=status,
                card_last4="4242",
                keyed=False,
                created_at=utcnow(),
            )
        )
        db.session.commit()


def report_of(app: Flask) -> Any:
    with app.app_context():
        found = reconciliation_report()
        db.session.remove()
    return found


def test_a_ledger_that_agrees_reports_nothing_and_exits_0(client: FlaskClient, runner: FlaskCliRunner) -> None:
    assert (
        client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": "a" * 20}).status_code == 201
    )
    declined = order_body(DECLINED_CARD)
    assert client.post("/api/orders", json=declined, headers={**ALICE, "Idempotency-Key": "d" * 20}).status_code == 402
    result = runner.invoke(args=["gateway", "reconcile-report"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "1 paid orders and 1 succeeded charges compared: the ledgers agree"


def test_each_kind_of_discrepancy_planted_in_the_ledger_is_reported_and_the_command_exits_1(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner
) -> None:
    # In agreement: an order paid by its one charge.
    plant_charge(app, "ch_good", "ord_good", 1000)
    plant_order(app, "paid", 1000, "ch_good", "ord_good")
    # Paid orders without a charge: no charge recorded; a charge the gateway never made; a declined one.
    plant_order(app, "paid", 1000, None, "ord_no_charge_id")
    plant_order(app, "paid", 1000, "ch_never_made", "ord_ghost_charge")
    plant_charge(app, "ch_declined", "ord_declined_charge", 1000, status="declined")
    plant_order(app, "refunded", 1000, "ch_declined", "ord_declined_charge")
    # Charges without a paid order: an unknown reference; an order still pending; a second charge for a paid one.
    plant_charge(app, "ch_orphan", "ord_unknown", 700)
    plant_charge(app, "ch_pending", "ord_pending", 800)
    plant_order(app, "pending", 800, None, "ord_pending")
    plant_charge(app, "ch_extra", "ord_good", 1000)
    # Amounts that differ: the order is for $10.00, its charge took $12.00.
    plant_charge(app, "ch_more", "ord_more", 1200)
    plant_order(app, "paid", 1000, "ch_more", "ord_more")

    report = report_of(app)
    found = {(d.kind, d.order_id, d.charge_id) for d in report.discrepancies}
    assert found == {
        (PAID_WITHOUT_CHARGE, "ord_no_charge_id", None),
        (PAID_WITHOUT_CHARGE, "ord_ghost_charge", "ch_never_made"),
        (PAID_WITHOUT_CHARGE, "ord_declined_charge", "ch_declined"),
        (CHARGE_WITHOUT_PAID_ORDER, "ord_unknown", "ch_orphan"),
        (CHARGE_WITHOUT_PAID_ORDER, "ord_pending", "ch_pending"),
        (CHARGE_WITHOUT_PAID_ORDER, "ord_good", "ch_extra"),
        (AMOUNTS_DIFFER, "ord_more", "ch_more"),
    }
    assert len(report.discrepancies) == 7 and not report.clean
    assert (report.paid_orders, report.succeeded_charges) == (5, 5)

    result = runner.invoke(args=["gateway", "reconcile-report"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 8  # one line per discrepancy, then the summary
    assert (
        "paid order without a charge: order=ord_ghost_charge charge=ch_never_made: the gateway has no such" in lines[1]
    )
    assert any("ord_more" in line and "$10.00" in line and "$12.00" in line for line in lines)
    assert any("ch_extra" in line and "paid by ch_good" in line for line in lines)
    assert lines[-1] == (
        "5 paid orders and 5 succeeded charges compared: 7 discrepancies (paid order without a charge: 3, "
        "charge without a paid order: 3, amounts that differ: 1)"
    )

    page = client.get("/lab/reconciliation").get_data(as_text=True)
    assert page.count('data-testid="discrepancy"') == 7
    assert "ch_never_made" in page and "ord_unknown" in page and "$12.00" in page


@pytest.mark.parametrize("path", ["/api/lab/legacy-gateway/orders", "/api/orders"])
def test_a_lost_answer_shows_until_the_retry_finishes_the_payment_then_the_report_is_clean(
    client: FlaskClient, runner: FlaskCliRunner, path: str
) -> None:
    headers = {**ALICE, "Idempotency-Key": "report-lost-answer-01"}
    assert client.post(path, json=order_body(ANSWER_LOST_CARD), headers=headers).status_code == 503
    waiting = runner.invoke(args=["gateway", "reconcile-report"])
    assert waiting.exit_code == 1 and "its order is pending" in waiting.output
    assert client.post(path, json=order_body(ANSWER_LOST_CARD), headers=headers).status_code == 201
    clean = runner.invoke(args=["gateway", "reconcile-report"])
    assert clean.exit_code == 0 and "the ledgers agree" in clean.output


def test_the_lab_page_says_the_ledgers_agree_when_they_do(client: FlaskClient) -> None:
    page = client.get("/lab/reconciliation").get_data(as_text=True)
    assert 'data-testid="reconciliation-state">clean<' in page
    assert "the ledgers agree" in page
