"""GET /metrics counts what the defence did (across gunicorn workers too); one JSON log line per audit event."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from checkout.audit import IdempotencyEvent
from tests.conftest import POSTGRES_URL
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    DECLINED_CARD,
    GOOD_CARD,
    SLOW_CARD,
    UNAVAILABLE_CARD,
    VERY_SLOW_CARD,
    Ledger,
    add_to_cart,
    age_every_record,
    checkout_fields,
    claim_as_a_dying_worker,
    event_of,
    expire_every_record,
    order_body,
    post_order,
    race,
    signed_post,
)
from tests.http import post_json, send
from tests.servers import gunicorn

API = {"endpoint": "POST /api/orders"}
EVERY_CARD = [GOOD_CARD, DECLINED_CARD, UNAVAILABLE_CARD, ANSWER_LOST_CARD, SLOW_CARD, VERY_SLOW_CARD]


def value(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


def moved(names: dict[str, dict[str, str] | None], action: Callable[[], Any]) -> dict[str, float]:
    """How much each counter moved while ``action`` ran (counters are per process: compare, never assume zero)."""
    before = {name: value(name, labels) for name, labels in names.items()}
    action()
    return {name: value(name, labels) - before[name] for name, labels in names.items()}


def test_a_claim_a_replay_and_a_mismatch_are_counted(client: FlaskClient) -> None:
    key = str(uuid.uuid4())

    def traffic() -> None:
        post_order(client, key)  # claimed
        post_order(client, key)  # replayed
        post_order(client, key, order_body(email="other@example.com"))  # mismatch

    counted = moved(
        {"checkout_claims_total": API, "checkout_replays_total": API, "checkout_mismatches_total": API}, traffic
    )
    assert counted == {"checkout_claims_total": 1, "checkout_replays_total": 1, "checkout_mismatches_total": 1}


def test_a_duplicate_while_the_first_runs_is_a_conflict(app: Flask) -> None:
    key = str(uuid.uuid4())
    body = order_body(card=SLOW_CARD)

    def two_at_once() -> None:
        statuses = sorted(r.status_code for r in race(2, lambda _i: post_order(app.test_client(), key, body)))
        assert statuses == [201, 409]

    assert moved({"checkout_conflicts_total": API}, two_at_once) == {"checkout_conflicts_total": 1}


def test_a_resumption_and_a_takeover_are_told_apart(app: Flask, client: FlaskClient) -> None:
    released, abandoned = str(uuid.uuid4()), str(uuid.uuid4())

    def traffic() -> None:
        assert post_order(client, released, order_body(card=UNAVAILABLE_CARD)).status_code == 503
        assert post_order(client, released, order_body(card=UNAVAILABLE_CARD)).status_code == 201  # resumed
        claim_as_a_dying_worker(app, abandoned)
        age_every_record(app)  # the dead worker's lease runs out
        assert post_order(client, abandoned).status_code == 201  # taken over

    counted = moved(
        {
            "checkout_resumptions_total": API,
            "checkout_takeovers_total": API,
            "checkout_gateway_faults_total": {"fault": "unavailable"},
        },
        traffic,
    )
    assert counted == {
        "checkout_resumptions_total": 1,
        "checkout_takeovers_total": 1,
        "checkout_gateway_faults_total": 1,
    }


def test_a_webhook_applied_once_and_its_duplicate_are_counted(client: FlaskClient, ledger: Ledger) -> None:
    def traffic() -> None:
        assert post_order(client, str(uuid.uuid4()), order_body(card=ANSWER_LOST_CARD)).status_code == 503
        event = event_of(ledger, "charge.succeeded")
        for _ in range(3):
            assert signed_post(client, event).status_code == 200

    counted = moved(
        {
            "checkout_webhooks_applied_total": {"type": "charge.succeeded"},
            "checkout_webhooks_duplicated_total": None,
            "checkout_gateway_faults_total": {"fault": "answer_lost"},
        },
        traffic,
    )
    assert counted == {
        "checkout_webhooks_applied_total": 1,
        "checkout_webhooks_duplicated_total": 2,
        "checkout_gateway_faults_total": 1,
    }


def scraped_from(client: FlaskClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = client.get("/metrics").get_data(as_text=True)
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


CONFIRMATIONS = ("checkout_emails_sent_total", (("kind", "order_confirmation"),))


def test_a_sent_email_and_the_checkout_latency_are_counted(app: Flask, client: FlaskClient) -> None:
    from checkout.mail.relay import relay_once

    def traffic() -> None:
        post_order(client, str(uuid.uuid4()))
        with app.app_context():
            assert len(relay_once().sent) == 1  # into the Maildir: the embedded transport

    assert scraped_from(client)[CONFIRMATIONS] == 0
    counted = moved({"checkout_latency_seconds_count": API}, traffic)
    assert counted == {"checkout_latency_seconds_count": 1}
    assert scraped_from(client)[CONFIRMATIONS] == 1


@pytest.mark.server
@pytest.mark.slow
def test_emails_sent_by_the_separate_relay_process_are_counted_by_the_web_app(
    client: FlaskClient, database_url: str
) -> None:
    post_order(client, str(uuid.uuid4()))
    relay = subprocess.run(
        [str(Path(sys.executable).parent / "flask"), "--app", "checkout", "outbox", "relay"],
        env={**os.environ, "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert relay.returncode == 0, relay.stderr
    assert scraped_from(client)[CONFIRMATIONS] == 1  # counted where it was marked sent: the outbox


def test_a_scrape_sets_no_session_cookie(client: FlaskClient) -> None:
    assert "Set-Cookie" not in client.get("/metrics").headers


def test_a_fresh_process_scrapes_every_labelled_series_before_any_request(tmp_path: Path) -> None:
    """In a process of its own (the suite's workers have served requests): the first scrape, nothing else."""
    scrape = (
        "from checkout import create_app; from checkout.extensions import db; "
        f"app = create_app({{'SQLALCHEMY_DATABASE_URI': 'sqlite:///{tmp_path}/m.db', 'SECRET_KEY': 'x' * 40}}); "
        "app.app_context().push(); db.create_all(); print(app.test_client().get('/metrics').get_data(as_text=True))"
    )
    env = {**os.environ, "CHECKOUT_INSTANCE_PATH": str(tmp_path / "instance")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    text = subprocess.run([sys.executable, "-c", scrape], capture_output=True, text=True, env=env, check=True).stdout
    families = {family.name: family for family in text_string_to_metric_families(text)}
    for name in ("checkout_latency_seconds", "checkout_claims", "checkout_takeovers", "checkout_gateway_faults"):
        assert families[name].samples, f"{name} has no series before the first request"
    latency = {s.labels.get("endpoint") for s in families["checkout_latency_seconds"].samples}
    assert {"POST /api/orders", "POST /api/payments", "POST /checkout"} <= latency


def test_the_known_series_are_there_from_the_start_at_zero_or_more(client: FlaskClient) -> None:
    found = scraped_from(client)
    for series in (
        ("checkout_takeovers_total", (("endpoint", "POST /api/payments"),)),
        ("checkout_conflicts_total", (("endpoint", "POST /orders/<order_id>/refunds"),)),
        ("checkout_gateway_faults_total", (("fault", "unavailable"),)),
        ("checkout_webhooks_applied_total", (("type", "refund.succeeded"),)),
        ("checkout_emails_sent_total", (("kind", "refund_receipt"),)),
        ("checkout_reconciled_total", (("outcome", "paid"),)),
        ("checkout_compensations_total", (("outcome", "compensated"),)),
        ("checkout_purged_total", (("outcome", "records"),)),
    ):
        assert series in found, series


def test_reconcile_and_purge_add_what_they_did_to_the_metrics_in_the_database(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner
) -> None:
    """They run as commands (cron) in processes nobody scrapes: their totals are kept in the database."""
    claim_as_a_dying_worker(app, str(uuid.uuid4()), lease_seconds=60)  # abandoned before the gateway
    assert post_order(client, str(uuid.uuid4())).status_code == 201
    age_every_record(app)
    reconciled, purged = (
        ("checkout_reconciled_total", (("outcome", "failed"),)),
        ("checkout_purged_total", (("outcome", "records"),)),
    )
    before = scraped_from(client)
    assert "failed" in runner.invoke(args=["idempotency", "reconcile"]).output
    expire_every_record(app)
    assert "purged 2 " in runner.invoke(args=["idempotency", "purge"]).output
    after = scraped_from(client)
    assert (after[reconciled] - before[reconciled], after[purged] - before[purged]) == (1, 2)


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_LAB": False}])
def test_metrics_are_served_in_prometheus_text_with_the_lab_off(client: FlaskClient) -> None:
    response = client.get("/metrics")
    assert response.status_code == 200 and response.mimetype == "text/plain"
    names = {family.name for family in text_string_to_metric_families(response.get_data(as_text=True))}
    assert {
        "checkout_claims",
        "checkout_replays",
        "checkout_conflicts",
        "checkout_mismatches",
        "checkout_resumptions",
        "checkout_takeovers",
        "checkout_gateway_faults",
        "checkout_webhooks_applied",
        "checkout_webhooks_duplicated",
        "checkout_emails_sent",
        "checkout_reconciled",
        "checkout_compensations",
        "checkout_purged",
        "checkout_latency_seconds",
    } <= names


def scraped(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = send("GET", f"{url}/metrics").body.decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.server
@pytest.mark.slow
def test_every_worker_answers_metrics_with_the_whole_servers_counts(
    app: Flask, database_url: str, instance: Path
) -> None:
    """Four workers count in four processes; any of them answers /metrics with the sum (multiprocess mode)."""
    keys = [str(uuid.uuid4()) for _ in range(12)]
    with gunicorn(database_url, instance, servers=1, workers=4) as [server]:
        url = f"{server.url}/api/orders"
        race(12, lambda i: post_json(url, order_body(), {**ALICE, "Idempotency-Key": keys[i]}))
        race(12, lambda i: post_json(url, order_body(), {**ALICE, "Idempotency-Key": keys[i]}))  # replays
        scrapes = [scraped(server.url) for _ in range(8)]  # whichever worker answers
    endpoint = (("endpoint", "POST /api/orders"),)
    for found in scrapes:
        assert found[("checkout_claims_total", endpoint)] == 12
        assert found[("checkout_replays_total", endpoint)] == 12
        assert found[("checkout_latency_seconds_count", endpoint)] == 24
    print(f"[{'postgresql' if POSTGRES_URL else 'sqlite'}] 8 scrapes of 4 workers: claims 12, replays 12 each time")


# --- the log lines ---------------------------------------------------------------------------------


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_VERY_SLOW_CARD_SECONDS": 2.0}])  # its 20 s prove nothing here
def test_every_audit_event_is_one_json_line_and_no_card_number_is_ever_logged(
    app: Flask, client: FlaskClient, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="checkout_audit")
    for card in EVERY_CARD:  # the API, each test card, each retried once
        key = str(uuid.uuid4())
        post_order(client, key, order_body(card=card))
        post_order(client, key, order_body(card=card))
    add_to_cart(client)  # and the browser's checkout
    client.post("/checkout", data={**checkout_fields(client), "email": "s@example.com", "card_number": GOOD_CARD})
    order = ledger.orders()[0]
    client.post(f"/api/orders/{order.public_id}/refunds", json={}, headers={**ALICE, "Idempotency-Key": "r" * 16})

    lines = [record.getMessage() for record in caplog.records if record.name == "checkout_audit"]
    events = [json.loads(line) for line in lines]
    assert len(events) == len(ledger.rows(IdempotencyEvent))  # one line per event, no more, no fewer
    fields = {"at", "event", "customer", "endpoint", "key", "order", "charge", "refund", "replay", "worker", "detail"}
    assert all(set(event) == fields for event in events)
    assert {event["endpoint"] for event in events} == {
        "POST /api/orders",
        "POST /checkout",
        "POST /api/orders/<order_id>/refunds",
    }
    assert [e["replay"] for e in events if e["event"] == "replayed"] and all(
        e["replay"] == (e["event"] == "replayed") for e in events
    )
    assert any(e["charge"] for e in events) and any(e["order"] for e in events) and any(e["refund"] for e in events)
    everything = "\n".join(lines)
    for card in EVERY_CARD:
        digits = card.replace(" ", "")
        assert digits not in everything and card not in everything
