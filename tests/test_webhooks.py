"""Gateway events: delivered at least once (over real HTTP, with duplicates and in no set order),
applied once, never moving an order backwards, and nothing applied without a good, fresh signature."""

from __future__ import annotations

import json
import random
import uuid
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.audit import IdempotencyEvent
from checkout.database import utcnow, writing
from checkout.gateway import GatewayEvent
from checkout.gateway.relay import deliverer
from checkout.gateway.signing import HEADER, sign
from checkout.gateway.webhooks import Deliverer
from checkout.mail.outbox import OutboxMessage
from checkout.shop.models import Order, Refund, WebhookReceipt
from checkout.shop.webhooks import GatewayEventData, apply
from tests.conftest import LiveServer
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    charge_as_its_holder,
    claim_as_a_dying_worker,
    event_of,
    form_fields,
    order_body,
    post_order,
    signed_post,
    writes_nothing,
)
from tests.helpers import (
    WEBHOOK_SECRET as SECRET,
)
from tests.payments import new_key, payment_body, payments_of, post_payment


def deliver(app: Flask, url: str, **options: Any) -> list[Any]:
    with app.app_context():
        sender = Deliverer(deliverer(app).engine, secret=SECRET, **options) if options else deliverer(app)
        return sender.deliver_due(f"{url}/webhooks/gateway")


@pytest.mark.slow
def test_a_lost_answer_payment_is_finished_by_its_webhook_alone(
    app: Flask, client: FlaskClient, live_server: LiveServer, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    assert post_order(client, key, order_body(card=ANSWER_LOST_CARD)).status_code == 503  # and never comes back
    [order] = ledger.orders()
    assert order.status == "pending" and len(ledger.succeeded_charges()) == 1
    deliveries = deliver(app, live_server.url)
    assert [d.status for d in deliveries if not d.duplicate] == [200]
    [order] = ledger.orders()
    assert order.status == "paid" and order.charge_id == ledger.succeeded_charges()[0].id
    assert [m.kind for m in ledger.rows(OutboxMessage)] == ["order_confirmation"]
    late = post_order(client, key, order_body(card=ANSWER_LOST_CARD))  # if it does come back: the same order
    assert late.status_code == 201 and late.get_json()["id"] == order.public_id
    assert len(ledger.succeeded_charges()) == 1


def test_an_order_the_webhook_pays_says_so_on_its_keys_timeline_once(
    app: Flask, client: FlaskClient, live_server: LiveServer, ledger: Ledger
) -> None:
    """Exercise 2 as a workshop meets it: the relay delivers the charge before the shopper retries, and the
    key's timeline names who paid the order; the retry then resumes, finds it paid, and notes no second charge."""
    key = str(uuid.uuid4())
    post_order(client, key, order_body(card=ANSWER_LOST_CARD))
    deliver(app, live_server.url)
    post_order(client, key, order_body(card=ANSWER_LOST_CARD))
    [order] = ledger.orders()
    names = ledger.events(IdempotencyEvent.key == key)
    assert names.count("charged") == 1
    assert names.index("answer_lost") < names.index("charged") < names.index("resumed") < names.index("completed")
    [charged] = ledger.rows(IdempotencyEvent, IdempotencyEvent.key == key, IdempotencyEvent.name == "charged")
    assert (charged.customer, charged.endpoint) == ("cus_demo_alice", "POST /api/orders")  # its record's scope
    assert {name: charged.detail[name] for name in ("order_id", "charge_id", "by")} == {
        "order_id": order.public_id,
        "charge_id": order.charge_id,
        "by": "webhook",
    }


def test_an_event_delivered_three_times_is_applied_once(app: Flask, client: FlaskClient, ledger: Ledger) -> None:
    assert post_order(client, str(uuid.uuid4()), order_body(card=ANSWER_LOST_CARD)).status_code == 503
    event = event_of(ledger, "charge.succeeded")
    results = [signed_post(client, event).get_json()["result"] for _ in range(3)]
    assert results == ["applied", "duplicate", "duplicate"]
    [receipt] = ledger.rows(WebhookReceipt)
    assert (receipt.result, receipt.duplicates) == ("applied", 2)
    assert [o.status for o in ledger.orders()] == ["paid"]
    assert len(ledger.rows(OutboxMessage)) == 1


@pytest.mark.parametrize(
    "tamper",
    ["no signature", "wrong secret", "stale", "from the future", "changed body", "malformed header"],
)
def test_a_bad_or_stale_signature_applies_nothing(app: Flask, client: FlaskClient, ledger: Ledger, tamper: str) -> None:
    assert post_order(client, str(uuid.uuid4()), order_body(card=ANSWER_LOST_CARD)).status_code == 503
    event = event_of(ledger, "charge.succeeded")
    body = json.dumps(event).encode()
    now = int(utcnow().timestamp())
    header = {
        "no signature": None,
        "wrong secret": sign("not-the-secret", now, body),
        "stale": sign(SECRET, now - 301, body),
        "from the future": sign(SECRET, now + 301, body),
        "changed body": sign(SECRET, now, body.replace(b"charge.succeeded", b"charge.failed")),
        "malformed header": "v1=abc",
    }[tamper]
    response = client.post(
        "/webhooks/gateway", data=body, content_type="application/json", headers={HEADER: header} if header else {}
    )
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    assert ledger.rows(WebhookReceipt) == []
    assert [o.status for o in ledger.orders()] == ["pending"]


def test_charge_failed_declines_a_pending_order_and_gives_its_stock_back_once(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    assert post_order(client, str(uuid.uuid4()), order_body(card=UNAVAILABLE_CARD)).status_code == 503
    [order] = ledger.orders()
    failed = {"type": "charge.failed", "created": 0, "data": {"id": "ch_x", "reference": order.public_id}}
    assert signed_post(client, {**failed, "id": "evt_failed_1"}).get_json()["result"] == "applied"
    assert signed_post(client, {**failed, "id": "evt_failed_2"}).get_json()["result"] == "no change"
    [order] = ledger.orders()
    assert order.status == "declined"
    stock = client.get("/api/products").get_json()[0]["stock"]
    assert stock == 100_000  # the two mugs came back, once


@pytest.mark.parametrize(
    ("type_", "result", "status"),
    [("charge.failed", "applied", "declined"), ("charge.succeeded", "ignored", "pending")],
    ids=["a failure declines", "a success naming no charge pays nothing"],
)
def test_a_charge_event_without_a_charge_id_stores_none(
    client: FlaskClient, ledger: Ledger, type_: str, result: str, status: str
) -> None:
    assert post_order(client, str(uuid.uuid4()), order_body(card=UNAVAILABLE_CARD)).status_code == 503
    [order] = ledger.orders()
    event = {"id": "evt_no_charge", "type": type_, "created": 0, "data": {"reference": order.public_id}}
    assert signed_post(client, event).get_json()["result"] == result
    [order] = ledger.orders()
    assert (order.status, order.charge_id) == (status, None)


def test_a_webhook_never_moves_an_order_backwards(app: Flask, client: FlaskClient, ledger: Ledger) -> None:
    paid = post_order(client, str(uuid.uuid4())).get_json()
    failed = {"id": "evt_late_failure", "type": "charge.failed", "created": 0, "data": {"reference": paid["id"]}}
    assert signed_post(client, failed).get_json()["result"] == "ignored"  # the gateway charged its key
    with app.app_context(), writing():  # and were the gateway's ledger to say nothing: the order is not pending
        data = GatewayEventData(reference=paid["id"])
        assert apply("charge.failed", data, charged=False) == ("no change", {})
    assert [o.status for o in ledger.orders()] == ["paid"]


def test_a_signed_charge_succeeded_the_gateway_does_not_hold_pays_nothing(client: FlaskClient, ledger: Ledger) -> None:
    """Signed by whoever holds the webhook secret, but not what the gateway did: its ledger is asked first."""
    other = post_order(client, str(uuid.uuid4())).get_json()  # a real charge, of another order
    assert post_order(client, str(uuid.uuid4()), order_body(card=UNAVAILABLE_CARD)).status_code == 503
    [pending] = [o for o in ledger.orders() if o.status == "pending"]
    payment = post_payment(client, new_key(), payment_body(UNAVAILABLE_CARD))
    assert payment.status_code == 503
    for charge_id, reference in (("ch_forged", pending.public_id), (other["charge_id"], pending.public_id),
                                 ("ch_forged", payment.get_json()["payment_id"])):  # fmt: skip
        event = {"id": f"evt_{uuid.uuid4().hex[:8]}", "type": "charge.succeeded", "created": 0,
                 "data": {"id": charge_id, "reference": reference}}  # fmt: skip
        assert signed_post(client, event).get_json()["result"] == "ignored", (charge_id, reference)
    assert sorted(o.status for o in ledger.orders()) == ["paid", "pending"]
    assert [p.status for p in payments_of(ledger)] == ["pending"]


def test_a_signed_charge_failed_for_a_key_the_gateway_charged_leaves_the_order_to_its_charge(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    """A failure event raced the retry that charged: the order is not declined beside a real charge."""
    key = str(uuid.uuid4())
    claim_as_a_dying_worker(app, key, lease_seconds=60)
    [order] = ledger.orders()
    charge_as_its_holder(app, order.public_id, order.gateway_key, (order.total_cents, order.currency))
    failed = {"id": "evt_raced", "type": "charge.failed", "created": 0, "data": {"reference": order.public_id}}
    assert signed_post(client, failed).get_json()["result"] == "ignored"
    assert [o.status for o in ledger.orders()] == ["pending"]  # the holder, or reconcile, pays it from its charge


def refund_whose_answer_was_lost(client: FlaskClient) -> None:
    """A paid order, then a refund of $5 the gateway made and whose answer was lost: pending in the shop."""
    key = str(uuid.uuid4())
    assert post_order(client, key, order_body(card=ANSWER_LOST_CARD)).status_code == 503
    order = post_order(client, key, order_body(card=ANSWER_LOST_CARD)).get_json()  # the retry pays
    refunded = client.post(
        f"/api/orders/{order['id']}/refunds",
        json={"amount_cents": 500},
        headers={**ALICE, "Idempotency-Key": str(uuid.uuid4())},
    )
    assert refunded.status_code == 503


def test_refund_succeeded_records_a_refund_the_shop_had_not_yet(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    refund_whose_answer_was_lost(client)
    assert [r.status for r in ledger.rows(Refund)] == ["pending"]
    assert signed_post(client, event_of(ledger, "refund.succeeded")).get_json()["result"] == "applied"
    assert [r.status for r in ledger.rows(Refund)] == ["succeeded"]
    assert sorted(m.kind for m in ledger.rows(OutboxMessage)) == ["order_confirmation", "refund_receipt"]


def test_a_refund_succeeded_event_without_a_refund_id_is_ignored_and_the_real_one_still_applies(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    refund_whose_answer_was_lost(client)
    event = event_of(ledger, "refund.succeeded")
    nameless = {**event, "id": "evt_no_refund_id", "data": {**event["data"], "id": None}}
    assert signed_post(client, nameless).get_json()["result"] == "ignored"
    assert [(r.status, r.gateway_refund_id) for r in ledger.rows(Refund)] == [("pending", None)]
    assert signed_post(client, event).get_json()["result"] == "applied"  # the gateway's own, with its id
    [refund] = ledger.rows(Refund)
    assert (refund.status, refund.gateway_refund_id) == ("succeeded", event["data"]["id"])


@pytest.mark.slow
def test_the_gateway_keeps_delivering_until_it_gets_a_2xx_waiting_longer_each_time(
    app: Flask, client: FlaskClient, live_server: LiveServer, ledger: Ledger
) -> None:
    assert post_order(client, str(uuid.uuid4()), order_body(card=ANSWER_LOST_CARD)).status_code == 503
    nowhere = deliver(app, "http://127.0.0.1:9")  # nobody listens there
    assert [d.status for d in nowhere] == [None]
    [event] = ledger.rows(GatewayEvent)
    assert event.delivered_at is None and event.attempts == 1 and event.next_attempt_at > utcnow()
    assert deliver(app, live_server.url) == []  # not due yet: backoff
    with app.app_context(), writing() as tx:
        tx.execute(sa.update(GatewayEvent).values(next_attempt_at=utcnow() - timedelta(seconds=1)))
    assert [d.status for d in deliver(app, live_server.url) if not d.duplicate] == [200]
    assert [o.status for o in ledger.orders()] == ["paid"]


@pytest.mark.slow
def test_events_sent_twice_on_purpose_and_out_of_order_are_each_applied_once(
    app: Flask, client: FlaskClient, live_server: LiveServer, ledger: Ledger
) -> None:
    for _ in range(5):
        assert post_order(client, str(uuid.uuid4()), order_body(card=ANSWER_LOST_CARD)).status_code == 503
    created = [e.id for e in sorted(ledger.rows(GatewayEvent), key=lambda e: (e.created, e.id))]
    deliveries = deliver(app, live_server.url, duplicate_rate=1.0, rng=random.Random(3))
    firsts = [d.event_id for d in deliveries if not d.duplicate]
    assert sorted(firsts) == sorted(created) and firsts != created  # every event, not in the order made
    assert len([d for d in deliveries if d.duplicate]) == 5  # each one twice
    assert all(r.result == "applied" and r.duplicates == 1 for r in ledger.rows(WebhookReceipt))
    assert [o.status for o in ledger.orders()] == ["paid"] * 5
    assert len(ledger.rows(OutboxMessage)) == 5


@pytest.mark.slow
def test_flask_gateway_deliver_delivers_from_the_command_line(
    app: Flask, client: FlaskClient, live_server: LiveServer, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    assert post_order(client, str(uuid.uuid4()), order_body(card=ANSWER_LOST_CARD)).status_code == 503
    output = runner.invoke(args=["gateway", "deliver", "--url", f"{live_server.url}/webhooks/gateway"]).output
    assert "charge.succeeded: delivered (200)" in output
    assert f"1 delivered, 0 failed, to {live_server.url}/webhooks/gateway" in output
    assert ledger.rows(Order)[0].status == "paid"
    again = runner.invoke(args=["gateway", "deliver", "--url", f"{live_server.url}/webhooks/gateway"]).output
    assert again.strip() == "nothing was due"


def test_a_payment_paid_by_its_webhook_and_refunded_since_answers_its_retry_with_the_order(
    client: FlaskClient, ledger: Ledger
) -> None:
    """The client comes back after the webhook paid its order and a refund was made: 201 with the order as it was
    paid (what every path answers this key with, whenever it answers: the order's own page shows the refund)."""
    key = str(uuid.uuid4())
    assert post_order(client, key, order_body(card=ANSWER_LOST_CARD)).status_code == 503
    signed_post(client, event_of(ledger, "charge.succeeded"))
    [order] = ledger.orders()
    refund_key = str(uuid.uuid4())
    for expected in (503, 201):  # the fault card loses the refund's first answer too
        refunded = client.post(
            f"/api/orders/{order.public_id}/refunds",
            json={"amount_cents": 100},
            headers={**ALICE, "Idempotency-Key": refund_key},
        )
        assert refunded.status_code == expected
    retry = post_order(client, key, order_body(card=ANSWER_LOST_CARD))
    assert retry.status_code == 201, retry.get_data()
    assert retry.get_json()["id"] == order.public_id and retry.get_json()["status"] == "paid"
    assert client.get(f"/api/orders/{order.public_id}", headers=ALICE).get_json()["status"] == "partially_refunded"
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


@pytest.mark.parametrize(
    "event",
    [
        {"id": "evt_1", "type": "charge.succeeded", "data": {"reference": "ord_nope", "id": "ch_nope"}},
        {"id": "evt_2", "type": "refund.succeeded", "data": {"gateway_key": "refund-re_nope", "id": "rf_nope"}},
        {"id": "evt_3", "type": "charge.disputed", "data": {}},
        {"id": "evt_4", "type": "refund.succeeded", "data": {"gateway_key": "refund-\u0000", "id": "rf_nope"}},
        {"id": "evt_5", "type": "charge.disputed", "data": {"id": "dp_" + "x" * 40, "reference": "ord_nope"}},
    ],
    ids=["unknown order", "unknown refund", "unknown type", "a refund key no row can have", "a long id, unread"],
)
def test_a_signed_event_about_nothing_this_shop_knows_is_ignored_and_changes_no_order(
    client: FlaskClient, ledger: Ledger, event: dict[str, Any]
) -> None:
    answer = signed_post(client, event)
    assert answer.status_code == 200 and answer.get_json()["result"] == "ignored"
    assert ledger.orders() == [] and ledger.rows(Refund) == []


@pytest.mark.parametrize(
    "body", [b"not json", b"[]", b'{"id": 1, "type": "charge.succeeded", "data": {}}', b'{"id": "evt_x"}']
)
def test_a_signed_body_that_is_not_an_event_is_400_and_writes_nothing(
    app: Flask, client: FlaskClient, body: bytes
) -> None:
    with writes_nothing(app):
        answer = signed_post(client, body)
    assert answer.status_code == 400 and answer.mimetype == "application/problem+json"


def test_redelivering_an_unknown_event_in_the_lab_says_so(client: FlaskClient) -> None:
    csrf = form_fields(client.get("/lab").get_data(as_text=True), form_id=None)["csrf_token"]
    answer = client.post("/lab/webhooks/evt_nope/redeliver", data={"csrf_token": csrf}, follow_redirects=True)
    assert answer.status_code == 200 and "There is no gateway event with that id." in answer.get_data(as_text=True)
