"""The storage choice on a real Redis: POST /api/lab/stores/redis/orders keeps its idempotency records in
Redis (SET NX with an expiry, the response stored with it). When Redis forgets a key, the orders' unique
(customer, idempotency key) in the database still holds: one order and one charge per key."""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from checkout.audit import IdempotencyEvent, IdempotencyRecord
from checkout.client import place_order
from checkout.lab.redis_store import PREFIX, REDIS_PATH
from checkout.lab.tables import LabOrder
from tests.conftest import LiveServer
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    BOB,
    GOOD_CARD,
    SLOW_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    bought,
    form_fields,
    order_body,
    race,
    table_counts,
    wait_for,
)
from tests.http import post_json
from tests.redis_server import client_for, flush

ROUTE = "/api/lab/stores/redis/orders"


@pytest.fixture
def app_overrides(redis_url: str) -> dict[str, Any]:
    return {"CHECKOUT_REDIS_URL": redis_url}


def post(client: FlaskClient, key: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    return client.post(
        ROUTE, json=order_body() if body is None else body, headers={**ALICE, "Idempotency-Key": key, **(headers or {})}
    )


def records_in_redis(url: str) -> dict[str, dict[str, Any]]:
    client = client_for(url)
    try:
        return {name: json.loads(client.get(name) or "{}") for name in client.scan_iter(match=PREFIX + "*")}
    finally:
        client.close()


def claims_per_key(ledger: Ledger) -> Counter[str]:
    return Counter(e.key for e in ledger.rows(IdempotencyEvent) if e.name == "claimed")


def damage(client_or_url: Any, prefix: str) -> dict[str, Any]:
    from tests.http import send

    if isinstance(client_or_url, str):
        return dict(send("GET", f"{client_or_url}/api/lab/damage?purchase_prefix={prefix}").json())
    return dict(client_or_url.get(f"/api/lab/damage?purchase_prefix={prefix}").get_json())


def charged_once_and_measured(client_or_url: Any, prefix: str, ledger: Ledger, what: str) -> None:
    """The lab's damage table for the purchases under ``prefix``: nothing charged more than once. Printed, with
    the ledger's counts, on a line that begins with ``what`` (``pytest -s``)."""
    found = damage(client_or_url, prefix)["totals"]
    assert found["charged_more_than_once_cents"] == 0
    print(
        f"\n[measure] redis store, {what} orders={len(ledger.orders())} "
        f"succeeded_charges={len(ledger.succeeded_charges())} "
        f"charged_more_than_once=${found['charged_more_than_once_cents'] / 100:.2f}"
    )


# --- the contract of POST /api/orders, on Redis -------------------------------------------------


def test_a_payment_is_201_and_its_record_lives_in_redis_with_its_response_and_an_expiry(
    client: FlaskClient, ledger: Ledger, redis_url: str
) -> None:
    created = post(client, "redis-first-payment-01", headers=bought("redis-one"))
    assert created.status_code == 201, created.get_json()
    [order] = ledger.orders()
    assert created.headers["Location"] == f"/api/orders/{order.public_id}"
    assert (order.path, order.purchase_ref, order.status) == (REDIS_PATH, "redis-one", "paid")
    assert ledger.records() == []  # nothing in the database's idempotency_records
    [(name, record)] = records_in_redis(redis_url).items()
    assert name.endswith(":POST /api/lab/stores/redis/orders:redis-first-payment-01")
    assert (record["state"], record["recovery_point"], record["response_status"]) == ("completed", "finished", 201)
    assert record["reference"] == order.public_id and record["owner"] is None
    ttl = client_for(redis_url).ttl(name)
    assert 86_000 < ttl <= 86_400  # CHECKOUT_KEY_LIFETIME_SECONDS: Redis expires it by itself


def test_a_replay_has_the_stored_status_and_byte_identical_body(client: FlaskClient, ledger: Ledger) -> None:
    first = post(client, "redis-replay-key-0001")
    again = post(client, "redis-replay-key-0001")
    assert (again.status_code, again.get_data()) == (201, first.get_data())
    assert again.headers["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first.headers
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


def test_the_same_key_with_another_body_is_422_and_the_record_is_untouched(
    client: FlaskClient, ledger: Ledger, redis_url: str
) -> None:
    post(client, "redis-reused-key-0001")
    before = records_in_redis(redis_url)
    reused = post(client, "redis-reused-key-0001", order_body(email="mallory@example.com"))
    assert reused.status_code == 422 and reused.get_json()["type"] == "idempotency-key-reused"
    assert records_in_redis(redis_url) == before and len(ledger.orders()) == 1


def test_a_key_is_scoped_to_its_customer(client: FlaskClient, ledger: Ledger) -> None:
    assert post(client, "redis-two-customers-01").status_code == 201
    assert post(client, "redis-two-customers-01", headers=BOB).status_code == 201
    assert len(ledger.orders()) == 2 and len(ledger.succeeded_charges()) == 2


@pytest.mark.slow
def test_the_same_key_still_in_progress_is_409_with_retry_after_or_waits_with_prefer(
    client: FlaskClient, ledger: Ledger
) -> None:
    key = "redis-in-progress-0001"
    first: list[Any] = []
    slow = threading.Thread(target=lambda: first.append(post(client, key, order_body(SLOW_CARD))))
    slow.start()
    wait_for(lambda: ledger.orders())  # the first request has claimed the key and created its order
    conflict = post(client, key, order_body(SLOW_CARD))
    assert conflict.status_code == 409 and conflict.headers["Retry-After"] in {"1", "2"}
    assert conflict.get_json()["idempotency_key"] == key and conflict.get_json()["order_id"]
    waited = post(client, key, order_body(SLOW_CARD), headers={"Prefer": "wait=10"})
    slow.join()
    assert waited.status_code == 201 and waited.headers["Preference-Applied"] == "wait=10"
    assert first[0].status_code == 201 and waited.get_data() == first[0].get_data()
    assert len(ledger.succeeded_charges()) == 1


def test_a_lost_answer_is_503_and_the_retry_resumes_from_the_record_in_redis(
    client: FlaskClient, ledger: Ledger
) -> None:
    key = "redis-lost-answer-0001"
    lost = post(client, key, order_body(ANSWER_LOST_CARD))
    assert lost.status_code == 503 and lost.headers["Retry-After"]
    assert post(client, key, order_body(ANSWER_LOST_CARD)).status_code == 201
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
    events = ledger.events(IdempotencyEvent.key == key)
    assert events.index("answer_lost") < events.index("released") < events.index("resumed") < events.index("charged")


def test_bad_requests_are_problems_like_the_api_and_write_nothing_anywhere(
    app: Flask, client: FlaskClient, redis_url: str
) -> None:
    before = table_counts(app)
    key = {"Idempotency-Key": "redis-bad-input-00001"}
    answers = [
        client.post(ROUTE, json=order_body(), headers=key),
        client.post(ROUTE, json=order_body(), headers={**ALICE}),
        client.post(ROUTE, data="{", content_type="application/json", headers={**ALICE, **key}),
        client.post(ROUTE, data="x", content_type="text/plain", headers={**ALICE, **key}),
        client.post(ROUTE, json=order_body(email="nope"), headers={**ALICE, **key}),
        client.post(ROUTE, json=order_body(items=[{"sku": "NOPE-01", "quantity": 1}]), headers={**ALICE, **key}),
    ]
    assert [a.status_code for a in answers] == [401, 400, 400, 415, 422, 422]
    assert {a.mimetype for a in answers} == {"application/problem+json"}
    assert table_counts(app) == before and records_in_redis(redis_url) == {}
    assert client.post(ROUTE, json=order_body(), headers={**ALICE, **key}).status_code == 201  # the key is usable


# --- a storm of duplicates: one claim, one order, one charge ---------------------------------------


@pytest.mark.slow
def test_a_storm_of_duplicates_on_the_redis_route_makes_one_claim_one_order_and_one_charge(
    live_server: LiveServer, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    body, headers = order_body(SLOW_CARD), {**ALICE, "Idempotency-Key": key, **bought(f"storm-{key}")}
    replies = race(20, lambda _i: post_json(f"{live_server.url}{ROUTE}", body, headers))
    statuses = Counter(r.status for r in replies)
    assert set(statuses) <= {201, 409}, statuses
    assert len({r.body for r in replies if r.status == 201}) == 1
    assert claims_per_key(ledger) == {key: 1}  # SET NX let exactly one of twenty claim the key
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
    charged_once_and_measured(
        live_server.url, "storm-", ledger, f"20 racing duplicates: statuses={dict(statuses)} claims=1"
    )


# --- Redis forgets: the orders' unique constraint holds ---------------------------------------------


def test_after_redis_forgets_a_finished_key_the_retry_gets_the_same_order_not_a_second(
    client: FlaskClient, ledger: Ledger, redis_url: str
) -> None:
    key = "redis-forgotten-key-001"
    first = post(client, key, headers=bought("forgotten"))
    flush(redis_url)  # Redis loses the key: restarted without persistence, evicted, flushed
    again = post(client, key, headers=bought("forgotten"))
    assert again.status_code == 201 and again.get_json()["id"] == first.get_json()["id"]
    assert again.get_data() == first.get_data()  # the answer is rebuilt from the order, not replayed
    assert "Idempotent-Replayed" not in again.headers  # ... and so it cannot say it was
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
    assert claims_per_key(ledger) == {key: 2}  # Redis let the key be claimed twice; the database did not
    charged_once_and_measured(client, "forgotten", ledger, "key forgotten after the payment, retried: claims=2")


def test_after_redis_forgets_a_key_mid_payment_the_retry_pays_the_pending_order_once(
    client: FlaskClient, ledger: Ledger, redis_url: str
) -> None:
    key = "redis-forgotten-mid-01"
    assert post(client, key, order_body(ANSWER_LOST_CARD)).status_code == 503  # charged; the answer lost
    [pending] = ledger.orders()
    assert pending.status == "pending" and len(ledger.succeeded_charges()) == 1
    flush(redis_url)
    assert post(client, key, order_body(ANSWER_LOST_CARD)).status_code == 201
    [order] = ledger.orders()
    [charge] = ledger.succeeded_charges()
    assert (order.public_id, order.status, order.charge_id) == (pending.public_id, "paid", charge.id)
    assert "order_found" in ledger.events(IdempotencyEvent.key == key)


def test_a_retry_with_another_body_after_redis_forgot_the_key_does_not_pay_the_pending_order(
    client: FlaskClient, ledger: Ledger, redis_url: str
) -> None:
    key = "redis-forgotten-other-1"
    assert post(client, key, order_body(ANSWER_LOST_CARD)).status_code == 503
    flush(redis_url)
    other = post(client, key, order_body(GOOD_CARD))
    assert other.status_code == 422  # the key placed an order for another body: as the record would have said
    assert [o.status for o in ledger.orders()] == ["pending"] and records_in_redis(redis_url) == {}
    polling = post(client, key, order_body(GOOD_CARD), headers={"Prefer": "respond-async"})
    assert polling.status_code == 422  # refused, as without Prefer: never a 202 pointing at another body's order


@pytest.mark.slow
def test_a_worker_whose_record_redis_forgot_mid_payment_still_answers_and_writes_no_record(
    client: FlaskClient, ledger: Ledger, redis_url: str
) -> None:
    key = "redis-forgotten-worker1"
    first: list[Any] = []
    slow = threading.Thread(target=lambda: first.append(post(client, key, order_body(SLOW_CARD))))
    slow.start()
    wait_for(lambda: records_in_redis(redis_url) and ledger.orders())  # claimed, order created, at the gateway
    flush(redis_url)
    slow.join()
    assert first[0].status_code == 201  # its order is paid in the database: that is the answer
    assert records_in_redis(redis_url) == {}  # it did not write over what Redis no longer holds
    assert "record_lost" in ledger.events(IdempotencyEvent.key == key)
    assert len(ledger.succeeded_charges()) == 1


@pytest.mark.slow
def test_redis_flushed_in_the_middle_of_a_run_leaves_one_order_and_one_charge_per_key_and_no_damage(
    live_server: LiveServer, ledger: Ledger, redis_url: str
) -> None:
    run = f"flush-{uuid.uuid4().hex[:6]}-"
    cards = [GOOD_CARD, ANSWER_LOST_CARD, UNAVAILABLE_CARD, SLOW_CARD] * 4
    bodies = [order_body(card) for card in cards]

    def pay(numbered: tuple[int, dict[str, Any]]) -> Any:
        number, body = numbered
        return place_order(
            live_server.url,
            "demo-alice-token",
            body,
            path=ROUTE,
            purchase=f"{run}{number}",
            max_attempts=10,
            base_delay=0.05,
            max_delay=0.5,
            timeout=1.0,  # shorter than the slow card: answers are dropped, and retried
            rng=random.Random(number),
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = pool.map(pay, enumerate(bodies))
        live_server.wait_for_answers(ROUTE, 4)
        answered_before = live_server.answer_count(ROUTE)
        flush(redis_url)  # in the middle of the run: Redis forgets every record
        outcomes = list(results)
    assert [r.status for r in outcomes] == [201] * len(bodies), [r.attempts for r in outcomes]
    assert 4 <= answered_before < live_server.answer_count(ROUTE)  # the run went on after the flush
    reclaimed = [key for key, claims in claims_per_key(ledger).items() if claims > 1]
    assert reclaimed, "no key was claimed again after the flush: Redis forgot nothing that mattered"
    orders = ledger.orders(LabOrder.path == REDIS_PATH)
    assert len(orders) == len(bodies) and {o.status for o in orders} == {"paid"}
    charges = ledger.succeeded_charges()
    assert sorted(c.reference for c in charges) == sorted(o.public_id for o in orders)  # one charge per order
    totals = damage(live_server.url, run)["totals"]
    assert totals["charged_more_than_once_cents"] == 0 and totals["never_charged_cents"] == 0
    assert totals["charged_cents"] == totals["ordered_cents"] == 3300 * len(bodies)
    assert ledger.rows(IdempotencyRecord) == []
    print(
        f"\n[measure] redis store, FLUSHDB mid-run: purchases={len(bodies)} attempts="
        f"{sum(len(r.attempts) for r in outcomes)} reclaimed_keys={len(reclaimed)} orders={len(orders)} "
        f"succeeded_charges={len(charges)} charged=${totals['charged_cents'] / 100:.2f} "
        f"charged_more_than_once=${totals['charged_more_than_once_cents'] / 100:.2f} "
        f"never_charged=${totals['never_charged_cents'] / 100:.2f}"
    )


# --- the lab: whether Redis answers, its records, the button that makes it forget ----------------


def test_the_lab_shows_that_redis_answers_its_records_and_forgets_only_this_stores_keys(
    client: FlaskClient, redis_url: str
) -> None:
    post(client, "redis-lab-page-key-001")
    foreign = client_for(redis_url)
    foreign.set("someone-else:counter", "7")  # the rate limits may share this database
    header = client.get("/lab").get_data(as_text=True)
    assert 'data-testid="redis-store-link"' in header and ">answering<" in header
    page = client.get("/lab/stores/redis").get_data(as_text=True)
    assert 'data-testid="redis-state">answering<' in page and "takes payments" in page
    assert page.count('data-testid="redis-record"') == 1 and "redis-lab-pag" in page
    csrf = form_fields(page, form_id=None)["csrf_token"]
    forgot = client.post("/lab/stores/redis/forget", data={"csrf_token": csrf}, follow_redirects=True)
    assert "Redis forgot 1 record of this store" in forgot.get_data(as_text=True)
    assert records_in_redis(redis_url) == {} and foreign.get("someone-else:counter") == "7"
    foreign.close()


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_REDIS_URL": ""}, {"CHECKOUT_REDIS_URL": "redis://127.0.0.1:1/3"}])
def test_without_redis_the_route_answers_503_problem_json_writes_nothing_and_the_lab_says_so(
    app: Flask, client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    before = table_counts(app)
    refused = post(client, "redis-unavailable-0001")
    assert refused.status_code == 503 and refused.mimetype == "application/problem+json"
    assert refused.get_json()["type"] == "redis-unavailable"
    assert table_counts(app) == before
    state = "not configured" if not app_overrides["CHECKOUT_REDIS_URL"] else "not answering"
    # Not configured is the default setup, not an alarm: only a Redis that should answer and does not is red.
    badge = "status " if not app_overrides["CHECKOUT_REDIS_URL"] else "status status-failed"
    assert f'<span class="{badge}">{state}<' in client.get("/lab").get_data(as_text=True)
    page = client.get("/lab/stores/redis").get_data(as_text=True)
    assert f'data-testid="redis-state">{state}<' in page and "answers 503" in page


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_LAB": False}])
def test_with_the_lab_off_the_redis_route_and_page_are_404(
    client: FlaskClient, app_overrides: dict[str, Any], ledger: Ledger
) -> None:
    assert post(client, "redis-lab-off-00000001").status_code == 404
    assert client.get("/lab/stores/redis").status_code == 404
    csrf = form_fields(client.get("/").get_data(as_text=True), form_id=None)["csrf_token"]  # a valid form, still 404
    assert client.post("/lab/stores/redis/forget", data={"csrf_token": csrf}).status_code == 404
    assert ledger.orders() == []


def test_a_request_that_loses_the_redis_claim_race_is_received_once_and_counted_as_a_conflict(
    live_server: LiveServer, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one engine over Redis: both requests find no record; SET NX picks one, and the loser is
    received and counted as a conflict like a loser of the SQL claim (it was neither, on its own engine)."""
    from tests.helpers import SameInstantLooks

    looks = SameInstantLooks(2).install(monkeypatch)
    key = str(uuid.uuid4())
    replies = race(
        2,
        lambda _i: post_json(
            f"{live_server.url}{ROUTE}", order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": key}
        ),
    )

    assert looks.met
    assert sorted(r.status for r in replies) == [201, 409]
    events = [e.name for e in ledger.rows(IdempotencyEvent) if e.key == key]
    assert events.count("received") == 2
    assert events.count("claimed") == 1 and events.count("conflict") == 1
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


@pytest.mark.slow
def test_past_a_few_waiters_a_duplicate_on_redis_is_answered_at_once(live_server: LiveServer, ledger: Ledger) -> None:
    """The starvation guard holds on Redis too: only a few duplicates of a key wait in a worker
    (``CHECKOUT_WAITERS_PER_KEY``, 2 by default); the rest are answered 409 at once."""
    key = str(uuid.uuid4())
    url = f"{live_server.url}{ROUTE}"
    first = threading.Thread(
        target=post_json, args=(url, order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": key})
    )
    first.start()
    wait_for(lambda: ledger.worker_of("gateway_called"))
    waiting = {**ALICE, "Idempotency-Key": key, "Prefer": "wait=10"}
    replies = race(6, lambda _i: post_json(url, order_body(card=SLOW_CARD), waiting))
    first.join()

    assert sorted(r.status for r in replies).count(409) >= 6 - 2, [r.status for r in replies]
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


def test_a_record_redis_forgets_during_the_first_phase_leaves_its_loss_in_the_trail(
    client: FlaskClient, ledger: Ledger, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order is committed, then its step finds no record in Redis: the request answers 409 (a retry
    claims again and finds the order), and the audit trail says what happened (it lost that note before)."""
    from checkout.shop.payment import PlaceOrder

    real = PlaceOrder.create

    def create_then_forget(self: PlaceOrder, operation: Any, nothing: None) -> Any:
        step = real(self, operation, nothing)
        flush(redis_url)  # Redis forgets the claim while the order's transaction is still open
        return step

    monkeypatch.setattr(PlaceOrder, "create", create_then_forget)
    key = "redis-forgotten-first-1"
    assert post(client, key).status_code == 409
    events = ledger.events(IdempotencyEvent.key == key)
    assert events[-2:] == ["record_lost", "lease_lost"], events
    monkeypatch.undo()
    assert post(client, key).status_code == 201  # the retry claims again and pays the order it placed
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
