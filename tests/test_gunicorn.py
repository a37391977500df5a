"""Real gunicorn processes (4 workers each), on this run's database (SQLite, or
PostgreSQL when TEST_DATABASE_URL is set): races across workers and servers,
and workers killed with SIGKILL in the middle of a payment."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskCliRunner

from checkout import client as retry_client
from checkout.gateway import GatewayRefund
from checkout.mail.outbox import OutboxMessage
from checkout.shop.models import Refund
from tests.conftest import POSTGRES_URL
from tests.helpers import (
    ALICE,
    BOB,
    GOOD_CARD,
    SLOW_CARD,
    Ledger,
    browser_at_checkout,
    order_body,
    race,
    reconcile_the_abandoned,
    stock_out_of_balance,
    wait_for,
)
from tests.http import Reply, post_json, send
from tests.servers import Server, gunicorn

pytestmark = [pytest.mark.slow, pytest.mark.server]

# A lease that runs out soon after a worker dies; it must outlive the gateway's timeout plus the slow card.
SHORT_LEASE = {
    "CHECKOUT_LEASE_SECONDS": "5",
    "CHECKOUT_GATEWAY_TIMEOUT_SECONDS": "2.5",
    "CHECKOUT_SLOW_CARD_SECONDS": "2",
}
BACKEND = "postgresql" if POSTGRES_URL else "sqlite"


def a_storm_then_a_retry(
    servers: list[Server], path: str, body: dict[str, Any], *, retry_on: int
) -> tuple[list[Reply], Reply]:
    """100 requests under one new key at the same instant, each to one of the two servers in turn, then the same
    request once more to ``servers[retry_on]`` once they were all answered: their replies, and the retry's."""
    headers = {**ALICE, "Idempotency-Key": str(uuid.uuid4())}
    replies = race(100, lambda i: post_json(f"{servers[i % 2].url}{path}", body, headers))
    return replies, post_json(f"{servers[retry_on].url}{path}", body, headers)


def one_answer_for_the_key(replies: list[Reply], retry: Reply) -> str:
    """Each of the storm's requests was answered 201 or 409 (in progress), and its 201s and the retry (a replay)
    carry one and the same answer: how many were told which, for the run's line."""
    statuses = [r.status for r in replies]
    assert all(status in (201, 409) for status in statuses), sorted(set(statuses))
    assert retry.status == 201 and retry.headers.get("Idempotent-Replayed") == "true"
    assert len({r.body for r in replies if r.status == 201} | {retry.body}) == 1
    return f"{statuses.count(201)} x 201, {statuses.count(409)} x 409"


def test_100_requests_with_one_key_over_two_servers_make_one_order_and_one_charge(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    with gunicorn(database_url, instance, servers=2) as servers:
        replies, final = a_storm_then_a_retry(servers, "/api/orders", order_body(card=SLOW_CARD), retry_on=0)
    told = one_answer_for_the_key(replies, final)
    print(
        f"[{BACKEND}] 100 same-key requests over 2 servers x 4 workers: {told}; "
        f"orders={len(ledger.orders())} succeeded charges={len(ledger.succeeded_charges())}"
    )
    assert len(ledger.orders()) == 1
    assert len(ledger.succeeded_charges()) == 1
    assert stock_out_of_balance(app) == {}


def test_50_distinct_keys_at_once_make_50_orders_and_50_charges(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    with gunicorn(database_url, instance, servers=1) as [server]:
        replies = race(
            50,
            lambda _i: post_json(
                f"{server.url}/api/orders", order_body(card=GOOD_CARD), {**ALICE, "Idempotency-Key": str(uuid.uuid4())}
            ),
        )
    print(
        f"[{BACKEND}] 50 distinct keys at once: {[r.status for r in replies].count(201)} x 201; "
        f"orders={len(ledger.orders())} succeeded charges={len(ledger.succeeded_charges())}"
    )
    assert [r.status for r in replies] == [201] * 50
    assert len({r.json()["id"] for r in replies}) == 50
    assert len(ledger.orders()) == 50
    assert len(ledger.succeeded_charges()) == 50
    assert stock_out_of_balance(app) == {}


def paid_order(url: str) -> dict:
    """An order paid with the slow card: a refund of it is slow too, so racing duplicates overlap."""
    reply = post_json(f"{url}/api/orders", order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": str(uuid.uuid4())})
    assert reply.status == 201
    paid: dict = reply.json()
    return paid


def test_100_duplicate_refunds_over_two_servers_refund_once(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    with gunicorn(database_url, instance, servers=2) as servers:
        order = paid_order(servers[0].url)
        path = f"/api/orders/{order['id']}/refunds"
        replies, final = a_storm_then_a_retry(servers, path, {"amount_cents": 500}, retry_on=1)
    told = one_answer_for_the_key(replies, final)
    refunds, given = ledger.rows(Refund), ledger.rows(GatewayRefund)
    [paid] = ledger.orders()
    print(
        f"[{BACKEND}] 100 duplicate refunds over 2 servers x 4 workers: {told}; refunds={len(refunds)} "
        f"gateway refunds={len(given)} refunded={paid.refunded_cents} of {paid.total_cents}"
    )
    assert [(r.amount_cents, r.status) for r in refunds] == [(500, "succeeded")]
    assert [g.amount_cents for g in given] == [500]
    assert paid.refunded_cents == 500 and paid.status == "partially_refunded"
    assert [m.kind for m in ledger.rows(OutboxMessage)] == ["order_confirmation", "refund_receipt"]


def test_100_refunds_of_everything_left_under_distinct_keys_refund_the_order_once(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    """Never more refunded than charged: one wins, the others are told what is left (nothing)."""
    with gunicorn(database_url, instance, servers=2) as servers:
        order = paid_order(servers[0].url)
        replies = race(
            100,
            lambda i: post_json(
                f"{servers[i % 2].url}/api/orders/{order['id']}/refunds",
                {},
                {**ALICE, "Idempotency-Key": str(uuid.uuid4())},
            ),
        )
    statuses = [r.status for r in replies]
    [paid] = ledger.orders()
    given = ledger.rows(GatewayRefund)
    print(
        f"[{BACKEND}] 100 refunds of all that is left, distinct keys, 2 servers: {statuses.count(201)} x 201, "
        f"{statuses.count(422)} x 422; gateway refunded {sum(g.amount_cents for g in given)} of {paid.total_cents}"
    )
    assert sorted(statuses) == [201] + [422] * 99
    assert {r.json()["type"] for r in replies if r.status == 422} == {"refund-exceeds-charge"}
    assert paid.status == "refunded" and paid.refunded_cents == paid.total_cents
    assert [g.amount_cents for g in given] == [paid.total_cents]


def pay_in_background(url: str, key: str) -> threading.Thread:
    """A client whose connection will die with the worker: it gets no answer."""

    def pay() -> None:
        with contextlib.suppress(OSError):  # the worker died: the connection closes without an answer
            post_json(f"{url}/api/orders", order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": key})

    thread = threading.Thread(target=pay, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("moment", ["before the gateway charged", "after the gateway charged"])
def test_a_worker_killed_mid_payment_is_resumed_by_the_retry(
    app: Flask, database_url: str, instance: Path, ledger: Ledger, moment: str
) -> None:
    key = str(uuid.uuid4())
    with gunicorn(database_url, instance, settings=SHORT_LEASE) as [server]:
        client = pay_in_background(server.url, key)
        pid = wait_for(lambda: ledger.worker_of("gateway_called"))
        if moment == "after the gateway charged":
            wait_for(ledger.charges)
        else:
            assert ledger.charges() == []
        os.kill(pid, signal.SIGKILL)
        client.join(timeout=30)
        charged_before_retry = len(ledger.charges())
        lines: list[str] = []
        result = retry_client.place_order(
            server.url,
            "demo-alice-token",
            order_body(card=SLOW_CARD),
            key=key,
            max_attempts=20,
            base_delay=0.2,
            max_delay=1.0,
            log=lines.append,
        )
    print(
        f"[{BACKEND}] worker killed {moment}: charges at the kill={charged_before_retry}; retry: " + " | ".join(lines)
    )
    assert charged_before_retry == (1 if moment.startswith("after") else 0)
    assert result.status == 201
    [order] = ledger.orders()
    assert order.status == "paid"
    [charge] = ledger.succeeded_charges()
    assert result.json()["charge_id"] == charge.id
    assert "resumed" in ledger.events()


def test_reconcile_finishes_a_payment_whose_worker_died_and_whose_client_never_came_back(
    app: Flask, database_url: str, instance: Path, ledger: Ledger, runner: FlaskCliRunner
) -> None:
    key = str(uuid.uuid4())
    with gunicorn(database_url, instance, settings={"CHECKOUT_SLOW_CARD_SECONDS": "4"}) as [server]:
        client = pay_in_background(server.url, key)
        pid = wait_for(lambda: ledger.worker_of("gateway_called"))
        wait_for(ledger.charges)
        os.kill(pid, signal.SIGKILL)
        client.join(timeout=30)
    assert [o.status for o in ledger.orders()] == ["pending"]
    output = reconcile_the_abandoned(app, runner)  # the dead worker's lease runs out
    print(f"[{BACKEND}] reconcile after a killed worker: {output.strip()}")
    assert "reconciled 1" in output
    [order] = ledger.orders()
    assert order.status == "paid"
    assert len(ledger.succeeded_charges()) == 1
    assert [(r.state, r.response_status) for r in ledger.records()] == [("completed", 201)]


def test_two_browser_submits_of_one_form_on_different_workers_charge_once(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    """JavaScript off, a double click, four worker processes: the two POSTs are free to land on two of them."""
    with gunicorn(database_url, instance) as [server]:
        browser, form = browser_at_checkout(server.url)
        finals = race(2, lambda _i: browser.open(f"{server.url}/checkout", data=form).read().decode())
    [order] = ledger.orders()
    assert all(f'data-testid="order-id">{order.public_id}<' in page for page in finals)
    assert len(ledger.succeeded_charges()) == 1
    assert ledger.events().count("replayed") == 1


def test_48_duplicates_of_one_slow_payment_leave_the_server_free_for_everyone_else(
    database_url: str, instance: Path, ledger: Ledger
) -> None:
    """Issue: one client pinned every worker thread with duplicates that all waited for one slow payment.

    Only a few duplicates of a key may wait in a worker (``CHECKOUT_WAITERS_PER_KEY``); the rest are
    told at once. So an unrelated request is answered while the slow payment is still at the gateway,
    not after it: an order of events, not a timing.
    """
    key = str(uuid.uuid4())
    done: dict[str, float] = {}
    body, headers = order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": key}
    # The lab off: its request log writes two rows per duplicate, load of its own that is not what this measures.
    settings = {"CHECKOUT_SLOW_CARD_SECONDS": "4", "CHECKOUT_LAB": "false"}
    with gunicorn(database_url, instance, settings=settings) as [server]:
        url = f"{server.url}/api/orders"

        def first() -> None:
            post_json(url, body, headers)
            done["payment"] = time.monotonic()

        payment = threading.Thread(target=first)
        payment.start()
        wait_for(lambda: "gateway_called" in ledger.events())  # at the gateway for 4 s
        storm = threading.Thread(
            target=lambda: race(48, lambda _: post_json(url, body, {**headers, "Prefer": "wait=10"}))
        )
        storm.start()
        wait_for(lambda: ledger.events().count("received") >= 17)  # the duplicates hold their threads now
        unrelated = send("GET", f"{server.url}/api/products", headers=BOB)
        done["unrelated"] = time.monotonic()
        storm.join()
        payment.join()
    assert unrelated.status == 200
    assert done["unrelated"] < done["payment"], "the unrelated request waited for the slow payment's threads"
    assert len(ledger.succeeded_charges()) == 1
