"""One client cannot starve the server: a duplicate waits cheaply (reads, never write
transactions) and only a few wait per key; per-client rate limits answer 429."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import event

from checkout.extensions import db
from tests.conftest import LiveServer
from tests.helpers import (
    ALICE,
    BOB,
    Ledger,
    browser_at_checkout,
    duplicates_of_a_slow_order,
    race,
    wait_for,
)


@contextmanager
def statements(app: Flask) -> Iterator[list[str]]:
    """Every SQL statement the app sends while the block runs."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(" ".join(statement.split()))

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


@pytest.mark.slow
@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_LAB": False}])  # the shop's own writes: not the lab's log
def test_a_waiting_duplicate_polls_with_reads_not_write_transactions(
    app: Flask, live_server: LiveServer, ledger: Ledger, app_overrides: dict[str, Any]
) -> None:
    browser, form = browser_at_checkout(live_server.url)  # slow card: the first submit takes 1.5 s
    with statements(app) as seen:
        first = threading.Thread(target=lambda: browser.open(f"{live_server.url}/checkout", data=form).read())
        first.start()
        wait_for(lambda: ledger.worker_of("gateway_called"))
        duplicate = browser.open(f"{live_server.url}/checkout", data=form).read().decode()  # waits for the first
        first.join()
    [order] = ledger.orders()
    assert f'data-testid="order-id">{order.public_id}<' in duplicate
    claims = [s for s in seen if s.upper().startswith("INSERT INTO IDEMPOTENCY_RECORDS")]
    immediate = [s for s in seen if s.upper() == "BEGIN IMMEDIATE"]
    assert len(claims) == 1, claims  # the first submit's claim; the duplicate only read while it waited
    # The first submit's own five units of work; the duplicate, waiting, adds none.
    # (SQLite's BEGIN IMMEDIATE: on PostgreSQL a unit begins without it, and the claim count above is the check.)
    assert len(immediate) <= 5, f"{len(immediate)} write transactions for two submits"


@pytest.mark.slow
@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_WAITERS_PER_KEY": 2}])
def test_past_a_few_waiters_a_duplicate_gets_the_still_processing_page_at_once(
    live_server: LiveServer, ledger: Ledger, app_overrides: dict[str, Any]
) -> None:
    browser, form = browser_at_checkout(live_server.url)
    first = threading.Thread(target=lambda: browser.open(f"{live_server.url}/checkout", data=form).read())
    first.start()
    wait_for(lambda: ledger.worker_of("gateway_called"))
    race(8, lambda _i: browser.open(f"{live_server.url}/checkout", data=form).read())
    first.join()
    answers = [status for status, _location in live_server.wait_for_answers("/checkout", 9)]
    original = answers.index("303")  # the first answer that shows the order
    processing_at_once = answers[:original].count("202")
    assert processing_at_once >= 8 - 2, answers
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


@pytest.mark.slow
def test_an_api_client_may_ask_to_wait_for_the_outcome_with_prefer_wait(
    live_server: LiveServer, ledger: Ledger
) -> None:
    first, [impatient, patient] = duplicates_of_a_slow_order(live_server.url, ledger, {}, {"Prefer": "wait=10"})
    assert impatient.status == 409
    assert patient.status == 201 and patient.headers["Idempotent-Replayed"] == "true"
    assert patient.headers["Preference-Applied"] == "wait=10"
    assert patient.body == first.body


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_RATE_LIMIT": "5 per minute"}])
def test_a_client_over_its_rate_limit_gets_429_problem_json_with_retry_after(
    client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    answers = [client.get("/api/products", headers=ALICE) for _ in range(6)]
    assert [a.status_code for a in answers[:5]] == [200] * 5
    limited = answers[5]
    assert limited.status_code == 429
    assert limited.mimetype == "application/problem+json"
    assert limited.get_json()["type"] == "too-many-requests"
    assert int(limited.headers["Retry-After"]) >= 1
    other_client = client.get("/api/products", headers={"Authorization": "Bearer demo-bob-token"})
    assert other_client.status_code == 200  # the limit is per client


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_RATE_LIMIT": "5 per minute"}])
def test_a_browser_over_its_rate_limit_gets_a_429_page(client: FlaskClient, app_overrides: dict[str, Any]) -> None:
    answers = [client.get("/") for _ in range(6)]
    assert answers[5].status_code == 429
    assert answers[5].mimetype == "text/html"
    assert int(answers[5].headers["Retry-After"]) >= 1


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_RATE_LIMIT": "off"}])
def test_rate_limits_can_be_turned_off(app: Flask, client: FlaskClient, app_overrides: dict[str, Any]) -> None:
    assert all(client.get("/api/products").status_code == 200 for _ in range(50))
    # Nothing counted them: on, even the default budget (10,000 a minute) would have, though none was refused.
    assert app.extensions["checkout.limiter"].enabled is False


def test_the_default_rate_limit_counts_a_storm_of_150_requests_and_refuses_none(
    app: Flask, client: FlaskClient
) -> None:
    assert all(client.get("/api/products", headers=ALICE).status_code == 200 for _ in range(150))
    counters = app.extensions["checkout.limiter"].storage.storage  # in this worker's memory: no Redis here
    assert [n for key, n in counters.items() if "/customer:cus_demo_alice/" in key] == [150]


def test_counting_a_request_starts_no_thread(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """limits' own memory storage starts a timer thread to sweep expired counters on every request that comes
    after its last timer ended (10 ms): about 0.25 ms of CPU each. The shop's sweeps on the request path."""
    started: list[threading.Timer] = []

    class Counted(threading.Timer):
        def start(self) -> None:
            started.append(self)
            super().start()

    monkeypatch.setattr(threading, "Timer", Counted)
    for _ in range(10):
        for timer in started:
            timer.join()  # a sweeping timer ends 10 ms after it starts: the next request comes after it
        assert client.get("/api/products", headers=ALICE).status_code == 200
    assert started == []


def test_with_redis_every_worker_counts_against_one_shared_limit(database_url: str, tmp_path: Any) -> None:
    """Two apps on one Redis stand for two gunicorn workers (or two servers): a client's budget is one
    budget, not one per worker. In memory each would let the client in three times."""
    from tests.conftest import make_app
    from tests.redis_server import own_redis_database

    with own_redis_database() as redis_url:
        settings = {"CHECKOUT_REDIS_URL": redis_url, "CHECKOUT_RATE_LIMIT": "3 per minute"}
        workers = [make_app(database_url, str(tmp_path / f"worker-{n}"), **settings) for n in (1, 2)]
        try:
            clients = [worker.test_client() for worker in workers]
            statuses = [clients[n % 2].get("/api/products", headers=ALICE).status_code for n in range(4)]
            assert statuses == [200, 200, 200, 429]
            assert clients[0].get("/api/products", headers=BOB).status_code == 200  # Bob has a budget of his own
        finally:
            for worker in workers:  # as the app fixture does: no connection left for the garbage collector
                with worker.app_context():
                    db.session.remove()
                    db.engine.dispose()
