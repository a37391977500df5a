"""The relays run only as their own processes, as the Procfile starts them: a web worker starts no thread
(``create_app``, and a real gunicorn server), and each ``--forever`` relay does its work for a real server
and stops cleanly on SIGTERM (what honcho sends) and on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient
from honcho.environ import parse_procfile

from checkout.config import settings
from checkout.extensions import db
from checkout.gateway import GatewayEvent
from checkout.mail.outbox import OutboxMessage
from checkout.shop.models import Order
from tests.conftest import LiveServer, make_app
from tests.helpers import ALICE, ANSWER_LOST_CARD, Ledger, order_body, post_order, wait_for
from tests.http import post_json, send
from tests.mailing import enqueue_message, smtp_server
from tests.relays import OUTBOX, WEBHOOKS, relay_forever
from tests.servers import ROOT, gunicorn

CONFIRMATION_ID = "<outbox.order_confirmation.ord_test1@checkout.invalid>"


def sent(ledger: Ledger) -> list[OutboxMessage]:
    return ledger.rows(OutboxMessage, OutboxMessage.sent_at.is_not(None))


def delivered(ledger: Ledger) -> list[GatewayEvent]:
    return ledger.rows(GatewayEvent, GatewayEvent.delivered_at.is_not(None))


def test_a_web_app_starts_no_thread_at_creation_nor_at_its_requests(database_url: str, tmp_path: Path) -> None:
    before = set(threading.enumerate())
    app = make_app(database_url, str(tmp_path / "instance"))
    try:
        client = app.test_client()
        client.get("/")
        client.get("/cart")
        # A payment writes an email into the outbox and an event for the gateway to deliver: work a relay would take.
        assert post_order(client, str(uuid.uuid4()), order_body()).status_code == 201
        started = [thread.name for thread in threading.enumerate() if thread not in before]
    finally:
        with app.app_context():
            db.engine.dispose()  # on PostgreSQL, a pool left to the garbage collector warns in a later test
    assert started == []


@pytest.mark.server
@pytest.mark.slow
def test_gunicorn_workers_relay_nothing_and_the_two_relay_processes_everything(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    secret = {"CHECKOUT_WEBHOOK_SECRET": settings(app).webhook_secret}  # the relay signs with it
    with gunicorn(database_url, instance, workers=2, settings=secret) as [server]:
        paid = post_json(f"{server.url}/api/orders", order_body(), {**ALICE, "Idempotency-Key": str(uuid.uuid4())})
        assert paid.status == 201
        for _ in range(6):
            assert send("GET", f"{server.url}/").status == 200
        assert len(ledger.rows(OutboxMessage)) == 1 and len(ledger.rows(GatewayEvent)) == 1
        # Proving an absence takes a wait: the threads this replaces polled every 1 s (webhooks) and 2 s
        # (mail) from a worker's first request; 2.5 s is two rounds of the one and a round of the other.
        threading.Event().wait(2.5)
        assert sent(ledger) == [] and delivered(ledger) == []

        settings(app).shop_url = server.url  # where the webhook relay delivers
        with relay_forever(app, database_url, OUTBOX) as outbox, relay_forever(app, database_url, WEBHOOKS) as hooks:
            wait_for(lambda: sent(ledger) and delivered(ledger))
            assert outbox.stop() == 0 and hooks.stop() == 0
    [event] = delivered(ledger)
    assert event.last_status == 200


@pytest.mark.server
def test_outbox_relay_forever_sends_to_a_real_smtp_server_and_stops_cleanly_on_sigterm(
    app: Flask, database_url: str, ledger: Ledger
) -> None:
    with smtp_server() as (recorder, port):
        settings(app).smtp_url = f"smtp://127.0.0.1:{port}"
        enqueue_message(app)
        with relay_forever(app, database_url, OUTBOX) as relay:
            [received] = recorder.wait_for(1)
            wait_for(lambda: sent(ledger))
            assert relay.stop(signal.SIGTERM) == 0
    out, err = relay.output()
    assert received["Message-ID"] == CONFIRMATION_ID
    assert f"sent {CONFIRMATION_ID}" in out and out.rstrip().endswith("stopped")
    assert "SIGTERM" in err
    assert len(recorder.received()) == 1  # stopping sent nothing twice


@pytest.mark.server
def test_gateway_deliver_forever_delivers_a_webhook_to_a_live_shop_and_stops_cleanly_on_ctrl_c(
    app: Flask, client: FlaskClient, live_server: LiveServer, database_url: str, ledger: Ledger
) -> None:
    # The gateway charges and the answer is lost: only the webhook can tell the shop the order is paid.
    assert post_order(client, str(uuid.uuid4()), order_body(card=ANSWER_LOST_CARD)).status_code == 503
    assert [order.status for order in ledger.orders()] == ["pending"]
    with relay_forever(app, database_url, WEBHOOKS) as relay:
        wait_for(lambda: [order.status for order in ledger.rows(Order)] == ["paid"])
        assert relay.stop(signal.SIGINT) == 0
    out, err = relay.output()
    assert "charge.succeeded: delivered (200)" in out and out.rstrip().endswith("stopped"), out + err
    assert "SIGINT" in err
    assert live_server.post_count("/webhooks/gateway") >= 1


# --- what make run and make serve start ------------------------------------------------------------


@pytest.mark.parametrize(
    ("procfile", "web"), [("Procfile", "flask --app checkout run"), ("Procfile.serve", "gunicorn")]
)
def test_each_procfile_has_the_web_server_and_both_relays_as_processes(procfile: str, web: str) -> None:
    processes = parse_procfile((ROOT / procfile).read_text()).processes
    assert list(processes) == ["web", "outbox", "webhooks", "events", "loyalty"]
    assert processes["web"].startswith(f"exec {web}")
    assert processes["outbox"] == "exec flask --app checkout outbox relay --forever"
    assert processes["webhooks"] == "exec flask --app checkout gateway deliver --forever"
    assert processes["events"] == "exec flask --app checkout events publish --forever"
    assert processes["loyalty"] == "exec flask --app checkout events consume loyalty --forever"


def make_dry_run(target: str, **variables: str) -> str:
    """The honcho line ``make -n target`` would run (nothing is run)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("CHECKOUT_", "MAKE"))}
    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", target, *(f"{k}={v}" for k, v in variables.items())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    [line] = [line for line in dry.stdout.splitlines() if "honcho start" in line]
    return line


@pytest.mark.parametrize(("target", "procfile"), [("run", "Procfile"), ("serve", "Procfile.serve")])
def test_make_run_and_serve_start_the_web_server_and_both_relays_on_host_and_port(target: str, procfile: str) -> None:
    line = make_dry_run(target, HOST="127.0.0.2", PORT="5099")
    assert line.endswith(f"honcho start -f {procfile} --port 5099 web outbox webhooks events loyalty")
    assert "HOST=127.0.0.2" in line and "CHECKOUT_SHOP_URL=http://127.0.0.2:5099" in line


@pytest.mark.parametrize("off", ["off", "OFF", "false", "0"])
def test_checkout_outbox_relay_off_leaves_the_outbox_relay_out_of_make_run(off: str) -> None:
    # Exercise 9: "CHECKOUT_OUTBOX_RELAY=off make run", then the relay by hand.
    assert make_dry_run("run", CHECKOUT_OUTBOX_RELAY=off).endswith("--port 5000 web webhooks events loyalty")


@pytest.mark.parametrize("off", ["off", "No"])
def test_checkout_loyalty_consumer_off_leaves_the_consumer_out_of_make_run(off: str) -> None:
    # Exercise 17: "CHECKOUT_LOYALTY_CONSUMER=off make run", then the consumer by hand, killed before its ack.
    assert make_dry_run("run", CHECKOUT_LOYALTY_CONSUMER=off).endswith("--port 5000 web outbox webhooks events")
