"""Each ``--forever`` relay, as its own process, does its work for a real server and stops cleanly on
SIGTERM (what a process manager sends) and on Ctrl-C."""

from __future__ import annotations

import signal
import uuid

from flask import Flask
from flask.testing import FlaskClient

from checkout.mail.models import OutboxMessage
from checkout.shop.models import Order
from tests.conftest import LiveServer
from tests.helpers import ANSWER_LOST_CARD, Ledger, order_body, post_order, wait_for
from tests.mailing import enqueue_message, smtp_server
from tests.relays import OUTBOX, WEBHOOKS, relay_forever

CONFIRMATION_ID = "<outbox.order_confirmation.ord_test1@checkout.invalid>"


def sent(ledger: Ledger) -> list[OutboxMessage]:
    return ledger.rows(OutboxMessage, OutboxMessage.sent_at.is_not(None))


def test_outbox_relay_forever_sends_to_a_real_smtp_server_and_stops_cleanly_on_sigterm(
    app: Flask, database_url: str, ledger: Ledger
) -> None:
    with smtp_server() as (recorder, port):
        app.config["CHECKOUT_SMTP_URL"] = f"smtp://127.0.0.1:{port}"
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
