"""Exercises 12 and 13 (content/en/exercises/12-redis-forgets.md and 13-legacy-gateway.md), done as their texts
say: the mass test and the retry client as real processes, the lab's pages and buttons in Chromium, and the
report command as a real process."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from flask import Flask
from playwright.sync_api import Page, expect

from checkout.audit import IdempotencyEvent
from checkout.lab.redis_store import REDIS_PATH
from tests.conftest import LiveServer
from tests.helpers import ANSWER_LOST_CARD, Ledger, wait_for
from tests.mailing import python_process, relay_environment

REDIS_ROUTE = "/api/lab/stores/redis/orders"


@pytest.fixture
def app_overrides(redis_url: str) -> dict[str, Any]:
    return {"CHECKOUT_REDIS_URL": redis_url}  # step 1: the shop served with its Redis store on


def command(*arguments: str, app: Flask, database_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *arguments],
        env=relay_environment(app, database_url),
        cwd=app.instance_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def retry_client(url: str, path: str, *, app: Flask, database_url: str) -> subprocess.CompletedProcess[str]:
    """The retry client (``python -m checkout.client``) paying through ``path`` with the card whose answer is lost."""
    arguments = ["--url", url, "--path", path, "--card", ANSWER_LOST_CARD]
    return command("-m", "checkout.client", *arguments, app=app, database_url=database_url)


def test_exercise_12_redis_forgets_a_key(
    page: Page, app: Flask, live_server: LiveServer, database_url: str, ledger: Ledger
) -> None:
    # Step 1: the lab's header says whether Redis answers.
    page.goto(f"{live_server.url}/lab")
    expect(page.get_by_test_id("redis-store-link")).to_contain_text("Redis store: answering")

    # Step 2: payments through the Redis store, from a second terminal (what make mass runs).
    arguments = ["--url", live_server.url, "--path", REDIS_ROUTE, "--payments", "60", "--clients", "8"]
    with python_process(app, database_url, "-m", "checkout.lab.mass", *arguments) as mass:
        # Step 3: while it runs, the Redis store page's button.
        page.get_by_test_id("redis-store-link").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("The Redis store")
        # Once a payment was told 503 (its gateway down, or its answer lost, on the first try): its retry,
        # a second later at the soonest (Retry-After), comes after the flush and must claim its key again.
        wait_for(lambda: any(path == REDIS_ROUTE and status == "503" for path, status, _ in live_server.answers))
        page.get_by_test_id("redis-forget").click()
        expect(page.get_by_role("status").first).to_contain_text("Redis forgot")
        answered_at_the_flush = live_server.answer_count(REDIS_ROUTE)
        output, errors = mass.communicate(timeout=180)

    # Step 4: the run's result, then the damage table's store:redis row.
    assert mass.returncode == 0, errors
    assert "result:     exact" in output, output
    assert live_server.answer_count(REDIS_ROUTE) > answered_at_the_flush  # the run went on after Redis forgot
    claims = Counter(e.key for e in ledger.rows(IdempotencyEvent) if e.name == "claimed")
    assert max(claims.values()) == 2  # keys claimed again after Redis forgot them, and never more orders:
    assert len(ledger.orders()) == 60 and len(ledger.records()) == 0
    page.goto(f"{live_server.url}/lab")
    row = page.get_by_test_id(f"damage-path-{REDIS_PATH}")
    expect(row.get_by_test_id("path-charged-more-than-once")).to_have_text("$0.00")
    print(f"\n[measure] exercise 12, the mass test through the Redis store, Redis told to forget mid-run:\n{output}")


def test_exercise_13_a_gateway_that_ignores_keys(
    page: Page, app: Flask, live_server: LiveServer, database_url: str, ledger: Ledger
) -> None:
    # Step 1: the retry client, through the legacy gateway, with the card whose answer is lost.
    paid = retry_client(live_server.url, "/api/lab/legacy-gateway/orders", app=app, database_url=database_url)
    # Step 2: the first attempt 503, the retry 201.
    assert paid.returncode == 0, paid.stdout + paid.stderr
    attempts = [line for line in paid.stdout.splitlines() if line.startswith("attempt ")]
    assert "-> 503" in attempts[0] and "-> 201" in attempts[-1] and len(attempts) == 2, paid.stdout
    assert len(ledger.succeeded_charges()) == 1

    # Step 3: the lab's reconciliation page, and the command: clean.
    page.goto(f"{live_server.url}/lab")
    page.get_by_test_id("reconciliation-link").click()
    expect(page.get_by_test_id("reconciliation-state")).to_have_text("clean")
    expect(page.get_by_test_id("discrepancy")).to_have_count(0)
    report = command(
        "-m", "flask", "--app", "checkout", "gateway", "reconcile-report", app=app, database_url=database_url
    )
    assert report.returncode == 0 and "the ledgers agree" in report.stdout, report.stdout + report.stderr
    [order] = ledger.orders()
    page.goto(f"{live_server.url}/lab?key={order.idempotency_key}")
    timeline = page.get_by_test_id("timeline")
    for step in ("answer_lost", "resumed", "looked_up", "charged"):
        expect(timeline).to_contain_text(step)

    # Step 4: the twin that retries without looking, and the page again.
    twin = retry_client(live_server.url, "/api/lab/legacy-gateway/no-lookup/orders", app=app, database_url=database_url)
    assert twin.returncode == 0, twin.stdout + twin.stderr
    assert len(ledger.succeeded_charges()) == 3  # one, then two for the twin's one order
    page.goto(f"{live_server.url}/lab/reconciliation")
    expect(page.get_by_test_id("reconciliation-state")).to_have_text("discrepancies")
    expect(page.get_by_test_id("discrepancy")).to_have_count(1)
    expect(page.get_by_test_id("discrepancy")).to_contain_text("charge without a paid order")
    report = command(
        "-m", "flask", "--app", "checkout", "gateway", "reconcile-report", app=app, database_url=database_url
    )
    assert report.returncode == 1 and "one more charge" in report.stdout, report.stdout + report.stderr
    page.goto(f"{live_server.url}/lab")
    row = page.get_by_test_id("damage-path-legacy-gateway:no-lookup")
    expect(row.get_by_test_id("path-charged-more-than-once")).not_to_have_text("$0.00")
    expect(
        page.get_by_test_id("damage-path-legacy-gateway").get_by_test_id("path-charged-more-than-once")
    ).to_have_text("$0.00")
