"""The lab's nine mistakes: each wrong twin of POST /api/orders meets the trigger that breaks it, and the safe
endpoint meets the very same trigger in the same test, on the same real database.

Each measuring test prints one line (visible with ``pytest -s``):

    [mistake check-then-insert] wrong: 3 orders, 3 charges, $66.00 charged more than once; safe: 1 order, ...

and asserts the damage on the wrong side (more than one order or charge, a leak, a wrong replay) and none on the
safe side. Then: bad input answered as the real API answers it, everything 404 with the lab off, the pages.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from markupsafe import escape
from werkzeug.test import TestResponse

from checkout.audit import IdempotencyEvent
from checkout.extensions import db
from checkout.gateway import SUCCEEDED, GatewayCharge
from checkout.i18n import format_money
from checkout.lab.content import inline
from checkout.lab.mistakes.catalog import BY_NAME, MISTAKES
from checkout.lab.tables import LabOrder
from checkout.shop.models import Order
from tests.conftest import LiveServer
from tests.helpers import (
    ALICE,
    ANSWER_LOST_CARD,
    BOB,
    GOOD_CARD,
    Ledger,
    SameInstantLooks,
    bought,
    form_fields,
    order_body,
    race,
    table_counts,
)
from tests.http import Reply, post_json

ROOT = Path(__file__).resolve().parent.parent
PRICE = 2 * 1400 + 500  # order_body(): two mugs and a sticker


def twin(name: str) -> str:
    return f"/api/lab/mistakes/{name}/orders"


def new_key() -> str:
    return str(uuid.uuid4())


# --- measuring: what the database holds for one checkout path, in money --------------------------


@dataclass(frozen=True)
class Damage:
    orders: int
    charges: int
    more_than_once_cents: int
    never_charged_cents: int

    def __str__(self) -> str:
        return (
            f"{self.orders} order{'s' * (self.orders != 1)}, {self.charges} charge{'s' * (self.charges != 1)}, "
            f"{format_money(self.more_than_once_cents)} charged more than once"
            + (f", {format_money(self.never_charged_cents)} never charged" if self.never_charged_cents else "")
        )


def damage_of(app: Flask, path: str) -> Damage:
    """Orders and succeeded charges of one path, read from the ledger; the money from the lab's damage API."""
    with app.app_context():
        order_ids = list(
            db.session.scalars(
                sa.select(Order.public_id).join(LabOrder, LabOrder.order_id == Order.id).where(LabOrder.path == path)
            )
        )
        references = db.session.scalars(sa.select(GatewayCharge.reference).where(GatewayCharge.status == SUCCEEDED))
        # A charge's reference is its order's id, or the id and "/<attempt>" for a twin that charges per attempt.
        charges = sum(1 for reference in references if reference.split("/")[0] in order_ids)
        db.session.remove()
    money = app.test_client().get("/api/lab/damage").get_json()["by_path"].get(path, {})
    return Damage(
        len(order_ids),
        int(charges or 0),
        int(money.get("charged_more_than_once_cents", 0)),
        int(money.get("never_charged_cents", 0)),
    )


def report(name: str, wrong: Damage, safe: Damage, *, wrong_saw: str = "", safe_saw: str = "") -> None:
    print(
        f"[mistake {name}] wrong: {wrong}{'; ' + wrong_saw if wrong_saw else ''}; "
        f"safe: {safe}{'; ' + safe_saw if safe_saw else ''}"
    )


SAFE = "safe"


def path(name: str) -> str:
    return f"mistake:{name}"


def damages(app: Flask, name: str) -> tuple[Damage, Damage]:
    """The damage on the wrong twin's path, and on the safe endpoint's, after both met the same trigger."""
    return damage_of(app, path(name)), damage_of(app, SAFE)


def send_to_both(
    client: FlaskClient, name: str, bodies: list[Any], headers: dict[str, str]
) -> tuple[list[TestResponse], list[TestResponse]]:
    """The same requests, one after the other under the same headers (one key), to the wrong twin ``name``, then
    to the safe endpoint: the answers of each."""
    wrong = [client.post(twin(name), json=body, headers=headers) for body in bodies]
    safe = [client.post("/api/orders", json=body, headers=headers) for body in bodies]
    return wrong, safe


# --- the nine, each against its trigger ---------------------------------------------------------


def test_no_key_charges_every_retry_again_and_the_safe_path_once(app: Flask, client: FlaskClient) -> None:
    """Trigger: the same request sent again (a retry after a timeout, a double-click, a proxy's resend)."""
    key = new_key()
    headers = {**ALICE, "Idempotency-Key": key, **bought("no-key-1")}
    wrong, safe = send_to_both(client, "no-key", [order_body()] * 2, headers)

    wrong_damage, safe_damage = damages(app, "no-key")
    report("no-key", wrong_damage, safe_damage)
    assert [r.status_code for r in wrong] == [201, 201]
    assert wrong[0].get_json()["id"] != wrong[1].get_json()["id"]
    assert wrong_damage == Damage(2, 2, PRICE, 0)
    assert [r.status_code for r in safe] == [201, 201] and safe[1].headers.get("Idempotent-Replayed") == "true"
    assert safe_damage == Damage(1, 1, 0, 0)


def test_check_then_insert_lets_racing_duplicates_make_several_orders_and_the_safe_path_one(
    app: Flask, live_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trigger: a storm of three racing duplicates, every one of which looks before any inserts."""
    storm = 3
    headers = {**ALICE, "Idempotency-Key": new_key(), **bought("storm-1")}

    held = SameInstantLooks(storm).install(monkeypatch)
    wrong = race(storm, lambda _i: post_json(live_server.url + twin("check-then-insert"), order_body(), headers))
    assert held.met  # all three read "new" before any of them inserted
    looks = SameInstantLooks(storm).install(monkeypatch)
    safe = race(storm, lambda _i: post_json(live_server.url + "/api/orders", order_body(), headers))
    assert looks.met  # and so did the safe endpoint's three: only its claim could decide

    wrong_damage, safe_damage = damages(app, "check-then-insert")
    report(
        "check-then-insert",
        wrong_damage,
        safe_damage,
        wrong_saw=f"answers {sorted(r.status for r in wrong)}",
        safe_saw=f"answers {sorted(r.status for r in safe)}",
    )
    assert [r.status for r in wrong] == [201] * storm
    assert len({r.json()["id"] for r in wrong}) == storm
    assert wrong_damage == Damage(storm, storm, (storm - 1) * PRICE, 0)
    created = [r for r in safe if r.status == 201]
    assert {r.status for r in safe} <= {201, 409}  # the losers: still in progress, or the winner's order replayed
    assert [r.headers.get("Idempotent-Replayed") for r in created].count(None) == 1
    assert len({r.json()["id"] for r in created}) == 1
    assert safe_damage == Damage(1, 1, 0, 0)


class WorkerDied(Exception):
    """The worker is gone: raised right after the gateway charged, before anything else could be written."""


def die_after_the_next_charge(app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next gateway call charges, then its worker dies (the in-process stand-in for kill -9)."""
    gateway = app.extensions["checkout.gateway"]
    real = gateway.charge
    armed = [True]

    def charge(**kwargs: Any) -> Any:
        made = real(**kwargs)
        if armed[0]:
            armed[0] = False
            raise WorkerDied("killed right after the gateway charged")
        return made

    monkeypatch.setattr(gateway, "charge", charge)


def test_key_after_operation_pays_again_after_a_crash_between_the_steps_and_the_safe_path_resumes(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trigger: the worker dies after the charge, before the next step; the client retries with its key."""
    headers = {**ALICE, "Idempotency-Key": new_key(), **bought("crash-1")}

    die_after_the_next_charge(app, monkeypatch)
    with pytest.raises(WorkerDied):
        client.post(twin("key-after-operation"), json=order_body(), headers=headers)
    wrong_retry = client.post(twin("key-after-operation"), json=order_body(), headers=headers)

    die_after_the_next_charge(app, monkeypatch)
    with pytest.raises(WorkerDied):
        client.post("/api/orders", json=order_body(), headers=headers)
    safe_retry = client.post("/api/orders", json=order_body(), headers=headers)

    wrong_damage, safe_damage = damages(app, "key-after-operation")
    report("key-after-operation", wrong_damage, safe_damage)
    assert wrong_retry.status_code == 201
    assert wrong_damage == Damage(2, 2, PRICE, 0)
    assert safe_retry.status_code == 201
    assert safe_damage == Damage(1, 1, 0, 0)
    with app.app_context():
        safe_order = db.session.scalars(
            sa.select(Order).join(LabOrder, LabOrder.order_id == Order.id).where(LabOrder.path == SAFE)
        ).one()
        assert safe_retry.get_json()["id"] == safe_order.public_id and safe_order.status == "paid"
        db.session.remove()


def test_key_deleted_after_answer_pays_a_late_retry_again_and_the_safe_path_replays(
    app: Flask, client: FlaskClient
) -> None:
    """Trigger: a late retry, after the first answer was sent (and lost on its way back)."""
    headers = {**ALICE, "Idempotency-Key": new_key(), **bought("late-1")}
    wrong, safe = send_to_both(client, "key-deleted-after-answer", [order_body()] * 2, headers)

    wrong_damage, safe_damage = damages(app, "key-deleted-after-answer")
    report("key-deleted-after-answer", wrong_damage, safe_damage)
    assert [r.status_code for r in wrong] == [201, 201] and "Idempotent-Replayed" not in wrong[1].headers
    assert wrong[0].get_json()["id"] != wrong[1].get_json()["id"]
    assert wrong_damage == Damage(2, 2, PRICE, 0)
    assert safe[1].headers.get("Idempotent-Replayed") == "true" and safe[1].data == safe[0].data
    assert safe_damage == Damage(1, 1, 0, 0)


def test_no_stored_result_replays_a_generic_answer_and_the_safe_path_the_first_one(
    app: Flask, client: FlaskClient
) -> None:
    """Trigger: a replay, the same request with the same key once the first is done."""
    headers = {**ALICE, "Idempotency-Key": new_key(), **bought("replay-1")}
    wrong, safe = send_to_both(client, "no-stored-result", [order_body()] * 2, headers)

    wrong_damage, safe_damage = damages(app, "no-stored-result")
    first_id, replayed = wrong[0].get_json()["id"], wrong[1].get_data(as_text=True).strip()
    report(
        "no-stored-result",
        wrong_damage,
        safe_damage,
        wrong_saw=f"the replay answered {wrong[1].status_code} {replayed}, without the order "
        f"(the first answer: {wrong[0].status_code} with the order)",
        safe_saw=f"the replay answered {safe[1].status_code}, byte-identical, Idempotent-Replayed: true",
    )
    assert wrong[0].status_code == 201
    assert wrong[1].status_code == 200 and wrong[1].data != wrong[0].data  # a wrong replay
    assert first_id not in wrong[1].get_data(as_text=True) and "Location" not in wrong[1].headers
    assert wrong_damage == Damage(1, 1, 0, 0)  # the money is right; the answer is not
    assert (safe[1].status_code, safe[1].data) == (safe[0].status_code, safe[0].data)
    assert (
        safe[1].headers.get("Idempotent-Replayed") == "true"
        and safe[1].headers.get("Location") == safe[0].headers["Location"]
    )
    assert safe_damage == Damage(1, 1, 0, 0)


def test_unscoped_key_shows_another_customer_the_first_ones_order_and_the_safe_path_does_not(
    app: Flask, client: FlaskClient
) -> None:
    """Trigger: another customer sends the same key string (their own order, their own email)."""
    key = new_key()
    results: dict[str, tuple[Any, Any]] = {}
    for url in (twin("unscoped-key"), "/api/orders"):
        alice = client.post(url, json=order_body(), headers={**ALICE, "Idempotency-Key": key, **bought("alice-1")})
        bob_body = order_body(email="bob@example.com", card_number="5555 5555 5555 4444")
        bob = client.post(url, json=bob_body, headers={**BOB, "Idempotency-Key": key, **bought("bob-1")})
        results[url] = (alice, bob)
    (wrong_alice, wrong_bob), (safe_alice, safe_bob) = results.values()

    wrong_damage, safe_damage = damages(app, "unscoped-key")
    report(
        "unscoped-key",
        wrong_damage,
        safe_damage,
        wrong_saw=f"Bob was refused ({wrong_bob.status_code} {wrong_bob.get_json().get('type')}) for a key he never "
        "used, and his purchase was never placed",
        safe_saw=f"Bob got an order for {safe_bob.get_json().get('email')}",
    )
    assert wrong_alice.status_code == 201
    # Alice's record answers Bob: its fingerprint (of Alice's body) is not his, so he is told he reused a key.
    assert wrong_bob.status_code == 422 and wrong_bob.get_json()["type"].endswith("idempotency-key-reused")
    assert wrong_damage.orders == 1  # and Bob's own purchase was never placed
    assert safe_alice.status_code == 201 and safe_bob.status_code == 201
    assert safe_bob.get_json().get("id") != safe_alice.get_json()["id"]
    assert safe_bob.get_json().get("email") == "bob@example.com"
    assert safe_alice.get_json()["id"].encode() not in safe_bob.data and b"alice" not in safe_bob.data
    assert safe_damage == Damage(2, 2, 0, 0)  # one order for each of them


def test_no_fingerprint_answers_a_changed_body_with_the_first_order_and_the_safe_path_refuses_it(
    app: Flask, client: FlaskClient, ledger: Ledger
) -> None:
    """Trigger: the same key with a changed body (five mugs instead of two)."""
    headers = {**ALICE, "Idempotency-Key": new_key(), **bought("changed-1")}
    two, five = order_body(), order_body(items=[{"sku": "MUG-01", "quantity": 5}])
    wrong, safe = send_to_both(client, "no-fingerprint", [two, five], headers)

    wrong_damage, safe_damage = damages(app, "no-fingerprint")
    answered = wrong[1].get_json()["items"]
    lines = ", ".join(f"{item['quantity']} × {item['sku']}" for item in answered)
    report(
        "no-fingerprint",
        wrong_damage,
        safe_damage,
        wrong_saw=f"the changed body (5 × MUG-01) was answered {wrong[1].status_code} with the first order ({lines})",
        safe_saw=f"the changed body was answered {safe[1].status_code} {safe[1].get_json().get('type')}",
    )
    assert wrong[1].status_code == 201 and wrong[1].data == wrong[0].data  # a wrong replay: not this body's answer
    assert {"sku": "MUG-01", "quantity": 5, "unit_price_cents": 1400} not in answered
    assert wrong_damage == Damage(1, 1, 0, 0)
    assert safe[1].status_code == 422 and safe[1].get_json().get("type") == "idempotency-key-reused"
    [record] = ledger.records()
    assert record.response_body == safe[0].data  # the stored answer is untouched
    assert safe_damage == Damage(1, 1, 0, 0)


def test_new_gateway_key_per_attempt_charges_every_retry_after_a_lost_answer_and_the_safe_path_once(
    app: Flask, client: FlaskClient
) -> None:
    """Trigger: the gateway charges but its answer is lost (card …0259); the client retries with its key."""
    headers = {**ALICE, "Idempotency-Key": new_key(), **bought("lost-1")}
    lost = order_body(card_number=ANSWER_LOST_CARD)
    wrong, safe = send_to_both(client, "new-gateway-key-per-attempt", [lost] * 2, headers)

    wrong_damage, safe_damage = damages(app, "new-gateway-key-per-attempt")
    report(
        "new-gateway-key-per-attempt",
        wrong_damage,
        safe_damage,
        wrong_saw=f"answers {[r.status_code for r in wrong]}",
        safe_saw=f"answers {[r.status_code for r in safe]}",
    )
    assert [r.status_code for r in wrong] == [503, 503]  # each new gateway key is a first call: charged, answer lost
    assert wrong_damage == Damage(1, 2, PRICE, 0)  # one order, charged twice
    assert [r.status_code for r in safe] == [503, 201]
    assert safe_damage == Damage(1, 1, 0, 0)


@pytest.mark.server
@pytest.mark.slow
def test_memory_store_pays_once_per_gunicorn_worker_and_the_safe_path_once(
    app: Flask, database_url: str, instance: Path
) -> None:
    """Trigger: four gunicorn workers, and duplicates of one request (one key) until two of the workers answered."""
    from tests.servers import gunicorn

    headers = {**ALICE, "Idempotency-Key": new_key(), **bought("workers-1")}
    with gunicorn(database_url, instance, workers=4) as [server]:
        wrong = duplicates_until_two_workers(
            lambda: post_json(server.url + twin("memory-store"), order_body(), headers),
            lambda replies: {reply.headers["Lab-Worker"] for reply in replies},
        )
        safe = duplicates_until_two_workers(
            lambda: post_json(server.url + "/api/orders", order_body(), headers),
            lambda _replies: workers_that_answered(app),
        )
    wrong_workers, safe_workers = {reply.headers["Lab-Worker"] for reply in wrong}, workers_that_answered(app)

    wrong_damage, safe_damage = damages(app, "memory-store")
    report(
        "memory-store",
        wrong_damage,
        safe_damage,
        wrong_saw=f"{len(wrong)} duplicates answered by {len(wrong_workers)} workers",
        safe_saw=f"{len(safe)} duplicates answered by {len(safe_workers)} workers",
    )
    assert len(wrong_workers) >= 2
    assert {r.status for r in wrong} <= {201, 409}  # 409: a duplicate that met its worker's own claim
    workers = len(wrong_workers)
    assert len({r.json()["id"] for r in wrong if r.status == 201}) == workers  # one order per worker that answered
    assert wrong_damage == Damage(workers, workers, (workers - 1) * PRICE, 0)
    assert len(safe_workers) >= 2
    assert {r.status for r in safe} <= {201, 409} and len({r.body for r in safe if r.status == 201}) == 1
    assert safe_damage == Damage(1, 1, 0, 0)


WAVE = 6


def duplicates_until_two_workers(
    post: Callable[[], Reply], workers: Callable[[list[Reply]], set[str]], waves: int = 50
) -> list[Reply]:
    """Send one request in waves of copies at once (each on its own connection) until two worker processes
    have answered. Which worker accepts a connection is the kernel's choice: a client that retries one request
    at a time can meet the same worker again and again, which would hide the mistake rather than disprove it."""
    replies: list[Reply] = []
    for _ in range(waves):
        replies += race(WAVE, lambda _i: post())
        if len(workers(replies)) >= 2:
            break
    return replies


def workers_that_answered(app: Flask) -> set[str]:
    """The workers (host:pid) that recorded a step of the safe endpoint's records: one per request, at least."""
    with app.app_context():
        found = set(db.session.scalars(sa.select(IdempotencyEvent.worker).where(IdempotencyEvent.name == "received")))
        db.session.remove()
    return found


# --- bad input: answered as the real API answers it, nothing written ------------------------------

BAD_REQUESTS: dict[str, dict[str, Any]] = {
    "no token": {"json": order_body(), "headers": {"Idempotency-Key": "k" * 20}},
    "an unknown token": {
        "json": order_body(),
        "headers": {"Authorization": "Bearer nope", "Idempotency-Key": "k" * 20},
    },
    "a malformed key": {"json": order_body(), "headers": {**ALICE, "Idempotency-Key": "short"}},
    "two keys": {"json": order_body(), "headers": {**ALICE, "Idempotency-Key": "a" * 20 + ", " + "b" * 20}},
    "not JSON": {"data": "items=1", "content_type": "text/plain", "headers": {**ALICE, "Idempotency-Key": "k" * 20}},
    "malformed JSON": {
        "data": '{"items": [',
        "content_type": "application/json",
        "headers": {**ALICE, "Idempotency-Key": "k" * 20},
    },
    "a list, not an object": {"json": [1, 2], "headers": {**ALICE, "Idempotency-Key": "k" * 20}},
    "an unknown sku": {
        "json": order_body(items=[{"sku": "NOPE-1", "quantity": 1}]),
        "headers": {**ALICE, "Idempotency-Key": "k" * 20},
    },
    "a quantity of 100 and a bad card": {
        "json": order_body(items=[{"sku": "MUG-01", "quantity": 100}], card_number="4242 4242 4242 4241"),
        "headers": {**ALICE, "Idempotency-Key": "k" * 20},
    },
    "a body over 64 KiB": {
        "data": json.dumps({**order_body(), "pad": "x" * 70_000}),
        "content_type": "application/json",
        "headers": {**ALICE, "Idempotency-Key": "k" * 20},
    },
}


@pytest.mark.parametrize("name", [mistake.name for mistake in MISTAKES])
def test_every_twin_answers_bad_input_as_the_real_api_does_and_writes_nothing(
    app: Flask, client: FlaskClient, name: str
) -> None:
    before = table_counts(app)
    for case, request in BAD_REQUESTS.items():
        if case in ("a malformed key", "two keys") and not BY_NAME[name].takes_key:
            continue  # no-key reads no key: that is its mistake (see the next test)
        real = client.post("/api/orders", **request)
        wrong = client.post(twin(name), **request)
        assert 400 <= wrong.status_code < 500, case
        assert wrong.mimetype == "application/problem+json", case
        assert (wrong.status_code, wrong.get_json()) == (real.status_code, real.get_json()), case
        assert wrong.headers.get("WWW-Authenticate") == real.headers.get("WWW-Authenticate"), case
    assert table_counts(app) == before


def test_a_missing_key_is_400_on_every_twin_that_reads_keys_and_no_key_does_not_even_look(
    app: Flask, client: FlaskClient
) -> None:
    for mistake in MISTAKES:
        answer = client.post(twin(mistake.name), json=order_body(), headers=ALICE)
        if mistake.takes_key:
            assert answer.status_code == 400 and answer.get_json()["type"] == "invalid-idempotency-key"
        else:
            assert answer.status_code == 201  # its mistake: a request without a key is simply paid
    assert damage_of(app, path("no-key")).orders == 1
    assert sum(damage_of(app, path(m.name)).orders for m in MISTAKES) == 1


def test_an_unknown_mistake_is_404_problem_json(client: FlaskClient) -> None:
    answer = client.post(twin("no-such-mistake"), json=order_body(), headers={**ALICE, "Idempotency-Key": "k" * 20})
    assert answer.status_code == 404 and answer.mimetype == "application/problem+json"
    assert "check-then-insert" in answer.get_json()["detail"]
    assert client.get("/lab/mistakes/no-such-mistake").status_code == 404


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_LAB": False}])
def test_with_the_lab_off_every_mistake_route_is_404(
    app: Flask, client: FlaskClient, app_overrides: dict[str, Any]
) -> None:
    before = table_counts(app)
    headers = {**ALICE, "Idempotency-Key": "k" * 20}
    csrf = form_fields(client.get("/").get_data(as_text=True), form_id=None)["csrf_token"]
    form = {"csrf_token": csrf, "customer": "alice", "key": "k" * 20, "card": "4242 4242 4242 4242", "wrong": "1"}
    for mistake in MISTAKES:
        answer = client.post(twin(mistake.name), json=order_body(), headers=headers)
        assert answer.status_code == 404 and answer.mimetype == "application/problem+json"
        assert client.get(f"/lab/mistakes/{mistake.name}").status_code == 404
        # a valid form, still no way in
        assert client.post(f"/lab/mistakes/{mistake.name}/send", data={**form, "quantity": "2"}).status_code == 404
    assert client.get("/lab/mistakes").status_code == 404
    assert table_counts(app) == before


# --- the pages ---------------------------------------------------------------------------------------


def test_the_mistakes_page_lists_the_nine_with_their_damage_and_links(client: FlaskClient) -> None:
    client.post(twin("no-key"), json=order_body(), headers={**ALICE, **bought("listed-1")})
    client.post(twin("no-key"), json=order_body(), headers={**ALICE, **bought("listed-1")})
    page = client.get("/lab/mistakes").get_data(as_text=True)
    for mistake in MISTAKES:
        assert f'href="/lab/mistakes/{mistake.name}"' in page
        assert f'data-testid="mistake-{mistake.name}"' in page
    row = page[page.index('data-testid="mistake-no-key"') :]
    assert 'data-testid="mistake-charged-more-than-once">$33.00<' in row[: row.index("</tr>")]
    assert 'href="/lab/mistakes"' in client.get("/lab").get_data(as_text=True)
    assert 'href="/lab/mistakes"' in client.get("/lab/exercises").get_data(as_text=True)


@pytest.mark.parametrize("name", [mistake.name for mistake in MISTAKES])
def test_each_mistake_page_shows_its_wrong_code_its_trigger_and_where_the_fix_lives(
    app: Flask, client: FlaskClient, name: str
) -> None:
    mistake = BY_NAME[name]
    page = client.get(f"/lab/mistakes/{name}").get_data(as_text=True)
    assert str(escape(mistake.source)) in page  # the whole module, as it runs
    assert 'data-testid="mistake-diff"' in page and "THE MISTAKE" in page
    diff = mistake.diff.splitlines()
    assert any(line.startswith("-") and not line.startswith("---") for line in diff)  # the real part ...
    assert any(line.startswith("+") and not line.startswith("+++") for line in diff)  # ... beside the wrong one
    for line in diff:
        assert str(escape(line)) in page
    assert "+def a_new_key_per_request(key: str) -> str:" in diff  # every twin's order key, shown as swapped too
    assert str(escape(mistake.shared_source)) in page and "class LabStore(SqlStore):" in mistake.shared_source
    with app.test_request_context():  # its text, rendered as the page renders it (content/en/mistakes/)
        text = mistake.text
        assert text.trigger in page and str(inline(text.what)) in page and str(inline(text.fix)) in page
    for fix in mistake.fixes:
        assert f"<code>{fix.file}</code>" in page
    assert "csrf_token" in page and 'data-testid="send-form"' in page


@pytest.mark.parametrize("name", [mistake.name for mistake in MISTAKES])
def test_every_fix_a_mistake_names_exists_in_the_safe_code_and_its_test_exists(name: str) -> None:
    mistake = BY_NAME[name]
    fix_text = mistake.text.fix
    assert fix_text.startswith(mistake.fixes[0].file)  # the text and its front matter name the same place first
    for fix in mistake.fixes:
        assert fix.file in fix_text and fix.function in fix_text  # the page's list says what the text says
        source = (ROOT / fix.file).read_text()
        *owner, function = fix.function.split(".")
        assert f"def {function}(" in source or f"class {function}" in source, fix
        for name_ in owner:
            assert f"class {name_}" in source, fix
    assert "THE MISTAKE" in mistake.source.split('"""', 2)[2]  # and the code says where it goes wrong
    tests = Path(__file__).read_text()
    assert f"def {mistake.test}(" in tests


def test_the_lab_and_its_damage_api_show_each_mistake_on_its_own_row(client: FlaskClient) -> None:
    for purchase in ("row-1", "row-1"):
        client.post(
            twin("key-deleted-after-answer"),
            json=order_body(),
            headers={**ALICE, "Idempotency-Key": "r" * 20, **bought(purchase)},
        )
    client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": "s" * 20, **bought("row-2")})
    damage = client.get("/api/lab/damage").get_json()
    assert damage["by_path"]["mistake:key-deleted-after-answer"]["charged_more_than_once_cents"] == PRICE
    assert set(damage["mistakes"]) == set(BY_NAME)
    assert damage["mistakes"]["key-deleted-after-answer"]["charged_more_than_once_cents"] == PRICE
    assert damage["mistakes"]["key-deleted-after-answer"]["page"] == "/lab/mistakes/key-deleted-after-answer"
    assert damage["mistakes"]["no-fingerprint"]["purchases"] == 0
    lab = client.get("/lab").get_data(as_text=True)
    row = lab[lab.index('data-testid="damage-path-mistake:key-deleted-after-answer"') :]
    row = row[: row.index("</tr>")]
    assert 'href="/lab/mistakes/key-deleted-after-answer"' in row and "status-failed" in row
    assert "status-completed" not in row  # never in the safe colour
    assert lab.index('data-testid="damage-path-safe"') < lab.index('data-testid="damage-path-mistake:')


@pytest.mark.slow
def test_the_page_form_sends_the_trigger_to_the_twin_and_the_safe_endpoint_and_shows_the_answers(
    app: Flask, live_server: LiveServer
) -> None:
    """no-fingerprint from the browser: two mugs, then five under the same key, to each endpoint."""
    import http.cookiejar
    import urllib.request
    from urllib.parse import urlencode

    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    page_url = f"{live_server.url}/lab/mistakes/no-fingerprint"
    fields = form_fields(browser.open(page_url).read().decode(), form_id=None)
    assert len(fields["key"]) == 36  # a key made for this page, kept while you retry
    form = {"csrf_token": fields["csrf_token"], "key": fields["key"], "customer": "alice", "card": GOOD_CARD}
    for target in ("wrong", "safe"):
        for quantity in ("2", "5"):  # the same key with another body
            pressed = {**form, "quantity": quantity, "copies": "1", target: "pressed"}
            browser.open(f"{page_url}/send", data=urlencode(pressed).encode()).read()
    page = browser.open(page_url).read().decode()
    shown = page[page.index('data-testid="sent"') :]
    statuses = [s.split("<", 1)[0].strip() for s in shown.split('data-testid="sent-status">')[1:]]
    assert statuses == ["422", "201", "201", "201"]  # newest first: safe refused the five; the twin replayed two
    assert "2 × MUG-01" in shown and "5 × MUG-01" not in shown
    assert damage_of(app, path("no-fingerprint")) == Damage(1, 1, 0, 0)
    assert damage_of(app, SAFE) == Damage(1, 1, 0, 0)


@pytest.mark.slow
def test_the_retry_client_reaches_a_twin_with_path(app: Flask, live_server: LiveServer) -> None:
    """What the key-after-operation page tells a student to run: a lost answer, then the client's retry."""
    from checkout import client as retry_client

    common = ["--url", live_server.url, "--card", ANSWER_LOST_CARD, "--quantity", "2", "--attempts", "2"]
    # Each retry is a new payment to the twin, whose answer is lost again: two attempts, two charges, no answer.
    assert retry_client.main([*common, "--path", twin("key-after-operation"), "--purchase", "client-wrong"]) == 1
    assert retry_client.main([*common, "--purchase", "client-safe"]) == 0
    assert damage_of(app, path("key-after-operation")) == Damage(2, 2, 2 * 1400, 0)
    assert damage_of(app, SAFE) == Damage(1, 1, 0, 0)


def test_the_twins_never_touch_the_safe_engines_records(app: Flask, client: FlaskClient, ledger: Ledger) -> None:
    """The lab's twins keep their records in the lab's own tables (the engine's audit trail names their
    endpoints), and their orders carry keys of their own: the shop's records and keys stay the shop's."""
    for mistake in MISTAKES:
        client.post(twin(mistake.name), json=order_body(), headers={**ALICE, "Idempotency-Key": "t" * 20})
    assert ledger.records() == []
    with app.app_context():
        endpoints = set(db.session.scalars(sa.select(IdempotencyEvent.endpoint)))
        db.session.remove()
    assert endpoints and all(endpoint.startswith("POST /api/lab/mistakes/") for endpoint in endpoints)
    assert all(order.idempotency_key != "t" * 20 for order in ledger.orders())


def test_key_after_operation_lets_two_duplicates_at_once_both_pay_and_answers_both(
    app: Flask, live_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its page's own trigger, "copies at once": both pay (its mistake), and both are answered 201; the
    second to finish finds the key written and writes nothing (a review found it failing with a 500)."""
    looks = SameInstantLooks(2).install(monkeypatch)
    headers = {**ALICE, "Idempotency-Key": new_key(), **bought("copies-1")}
    replies = race(2, lambda _i: post_json(live_server.url + twin("key-after-operation"), order_body(), headers))
    assert looks.met
    assert [r.status for r in replies] == [201, 201]
    assert damage_of(app, path("key-after-operation")) == Damage(2, 2, PRICE, 0)


def test_the_memory_store_takes_over_only_the_record_as_it_was_read() -> None:
    """Its take-over is a compare-and-set, as every store's: a view read before another worker finished
    the record cannot reopen it (a review found it resetting a completed record)."""
    from checkout.idempotency import Complete, Scope, Settings, StoredResponse
    from checkout.lab.mistakes.memory_store import MemoryStore

    store, settings, scope = MemoryStore(), Settings(lease_seconds=0.01), Scope("cus_x", "POST /x", "k" * 20)
    held = store.claim(scope, "f", "owner-a", settings)
    assert held is not None
    threading.Event().wait(0.05)  # the lease runs out
    stale = store.find(scope)
    assert stale is not None and not stale.lease_live
    taken = store.take_over(stale, "owner-b", settings)
    assert taken is not None
    store.save_step(taken, Complete(StoredResponse(201, {}, b"paid")), settings)
    assert store.take_over(stale, "owner-c", settings) is None
    done = store.find(scope)
    assert done is not None and done.completed and done.response == StoredResponse(201, {}, b"paid")


@pytest.mark.parametrize("name", [mistake.name for mistake in MISTAKES])
def test_each_twin_is_the_shops_pipeline_with_exactly_the_one_part_it_names(name: str) -> None:
    """The claim the pages make: a twin is SAFE at its own endpoint (twin.py) with one part swapped."""
    from dataclasses import fields

    from checkout.lab.mistakes.twin import twin

    mistake = BY_NAME[name]
    base = twin(name)  # SAFE at the twin's endpoint, with nothing of its own swapped
    differs = {f.name for f in fields(base) if getattr(base, f.name) != getattr(mistake.pipeline, f.name)}
    assert differs == {mistake.module.SWAPPED}
