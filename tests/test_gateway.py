"""The mock gateway on its own: idempotent on the gateway key, its own transactions, its test cards."""

from __future__ import annotations

import threading

import pytest
from flask import Flask
from sqlalchemy.exc import IntegrityError

from checkout.database import utcnow
from checkout.extensions import db
from checkout.gateway import (
    CardDeclined,
    Gateway,
    GatewayCharge,
    GatewayTimeout,
    GatewayUnavailable,
    KeyReused,
    ReferenceAlreadyCharged,
)
from tests.conftest import POSTGRES_URL
from tests.helpers import ANSWER_LOST_CARD, DECLINED_CARD, GOOD_CARD, UNAVAILABLE_CARD, Ledger


@pytest.fixture
def gateway(app: Flask) -> Gateway:
    with app.app_context():
        return Gateway(db.engine, slow_seconds=0.2, timeout_seconds=5)


def charge(gateway: Gateway, key: str = "gk-1", card: str = GOOD_CARD, amount: int = 1000, reference: str = "ord_1"):
    return gateway.charge(gateway_key=key, amount_cents=amount, currency="USD", card_number=card, reference=reference)


def test_the_same_gateway_key_never_charges_twice(gateway: Gateway, ledger: Ledger) -> None:
    first = charge(gateway)
    assert charge(gateway) == first
    assert [c.id for c in ledger.charges()] == [first.id]


def test_racing_calls_with_one_gateway_key_make_one_charge(gateway: Gateway, ledger: Ledger) -> None:
    barrier = threading.Barrier(10)
    ids: list[str] = []

    def call() -> None:
        barrier.wait()
        ids.append(charge(gateway).id)

    threads = [threading.Thread(target=call) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 1 and len(ledger.charges()) == 1


def test_a_gateway_key_reused_for_another_amount_is_refused(gateway: Gateway) -> None:
    charge(gateway)
    with pytest.raises(KeyReused):
        charge(gateway, amount=999)


def test_a_reference_gets_at_most_one_succeeded_charge_even_under_other_keys(gateway: Gateway, ledger: Ledger) -> None:
    charge(gateway, key="gk-1")
    with pytest.raises(ReferenceAlreadyCharged):
        charge(gateway, key="gk-2")
    assert len(ledger.succeeded_charges()) == 1


def test_the_database_itself_refuses_a_second_succeeded_charge_for_a_reference(app: Flask, gateway: Gateway) -> None:
    charge(gateway, key="gk-1")
    with app.app_context():
        db.session.add(
            GatewayCharge(
                id="ch_x",
                gateway_key="gk-2",
                reference="ord_1",
                amount_cents=1000,
                currency="USD",
                status="succeeded",
                card_last4="4242",
                created_at=utcnow(),
            )
        )
        with pytest.raises(IntegrityError):
            db.session.commit()
        db.session.rollback()


def test_a_declined_card_is_recorded_and_declined_again_on_repeat(gateway: Gateway, ledger: Ledger) -> None:
    with pytest.raises(CardDeclined):
        charge(gateway, card=DECLINED_CARD)
    with pytest.raises(CardDeclined):
        charge(gateway, card=DECLINED_CARD)
    assert [c.status for c in ledger.charges()] == ["declined"]


def test_the_unavailable_card_fails_once_before_charging_then_succeeds(gateway: Gateway, ledger: Ledger) -> None:
    with pytest.raises(GatewayUnavailable):
        charge(gateway, card=UNAVAILABLE_CARD)
    assert ledger.charges() == []
    assert charge(gateway, card=UNAVAILABLE_CARD).succeeded


def test_the_lost_answer_card_charges_then_times_out_once(gateway: Gateway, ledger: Ledger) -> None:
    with pytest.raises(GatewayTimeout):
        charge(gateway, card=ANSWER_LOST_CARD)
    [stored] = ledger.charges()
    assert charge(gateway, card=ANSWER_LOST_CARD).id == stored.id


@pytest.mark.skipif(
    not POSTGRES_URL,
    reason="needs PostgreSQL: SQLite's single writer would make the gateway "
    "wait for the open transaction (the shop never holds one across a call)",
)
def test_a_charge_survives_a_rollback_of_the_callers_transaction(app: Flask, gateway: Gateway, ledger: Ledger) -> None:
    from checkout.shop.models import Customer

    with app.app_context():
        db.session.add(Customer(public_id="cus_rolled_back", created_at=utcnow()))
        db.session.flush()  # the shop's transaction is open and has written
        charge(gateway)  # the gateway commits on its own connection
        db.session.rollback()
    assert len(ledger.charges()) == 1
    assert ledger.rows(Customer, Customer.public_id == "cus_rolled_back") == []
