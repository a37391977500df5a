"""A real nginx in front of two real gunicorn servers on this run's database (SQLite, or PostgreSQL
when TEST_DATABASE_URL is set), configured as make proxy configures it
(deploy/nginx/checkout.conf.template): it waits 1 s for the answer to a POST it resends, then sends it to
the other server (proxy_next_upstream error timeout non_idempotent), twice at most. The slow
card takes 3 s, so every payment here outlasts the proxy.

What nginx did is read from its own access log (every server a request went to, and what each
answered); what the shop did, from the ledger.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlencode

import pytest
from flask import Flask

from checkout import client as retry_client
from checkout.audit import IdempotencyEvent
from checkout.lab.proxy import SERVER_NAMES
from checkout.lab.servers import LabWorker
from tests.conftest import POSTGRES_URL
from tests.helpers import (
    ALICE,
    GOOD_CARD,
    SLOW_CARD,
    Ledger,
    browser_at_checkout,
    browser_with_cart,
    form_fields,
    order_body,
    wait_for,
)
from tests.http import post_json, send
from tests.proxies import NEEDS_NGINX, proxied_shop
from tests.servers import Server

pytestmark = [pytest.mark.slow, NEEDS_NGINX, pytest.mark.server]

BACKEND = "postgresql" if POSTGRES_URL else "sqlite"
# A lease that runs out soon after a server dies; it must outlive the gateway's timeout plus the slow card.
SHORT_LEASE = {
    "CHECKOUT_LEASE_SECONDS": "5",
    "CHECKOUT_GATEWAY_TIMEOUT_SECONDS": "2.5",
    "CHECKOUT_SLOW_CARD_SECONDS": "2",
}


def servers_that_received(ledger: Ledger) -> list[str]:
    """The server of each ``received`` event, oldest first: where every attempt landed, by the lab's table."""
    server_of = {row.worker: row.server for row in ledger.rows(LabWorker)}
    return [server_of[worker] for worker in ledger_workers(ledger, "received")]


def ledger_workers(ledger: Ledger, event: str) -> list[str]:
    """The worker (host:pid) of each ``event``, oldest first."""
    return [e.worker for e in sorted(ledger.rows(IdempotencyEvent, IdempotencyEvent.name == event), key=lambda e: e.id)]


def submit(browser: urllib.request.OpenerDirector, url: str, form: bytes | None) -> tuple[int, str]:
    """POST a form as a browser does (following the 303), or GET without one; the final status and page."""
    try:
        with browser.open(url, data=form) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode()


def test_a_payment_slower_than_the_proxy_is_sent_to_both_servers_and_charged_once(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    with proxied_shop(database_url, instance) as shop:
        browser, form = browser_at_checkout(shop.url)
        submit(browser, f"{shop.url}/checkout", form)
        sent = shop.sent("POST /checkout")
        wait_for(lambda: "completed" in ledger.events())  # the first copy's payment is done
    print(
        f"[{BACKEND}] one Pay through nginx: sent to {[shop.name_of(u) for u in sent.upstreams]}, "
        f"answers {list(sent.statuses)}, client got {sent.status}; received by {servers_that_received(ledger)}; "
        f"events {ledger.events()}"
    )
    assert len(ledger.orders()) == 1
    assert len(ledger.succeeded_charges()) == 1
    assert sorted(shop.name_of(upstream) for upstream in sent.upstreams) == ["app-1", "app-2"]  # one copy each
    assert sent.statuses[0] == "504"  # nginx gave up on the first server after 1 s, and sent the POST on
    assert sorted(servers_that_received(ledger)) == ["app-1", "app-2"]  # both copies reached the shop
    assert "conflict" in ledger.events()  # the second found the first's record, still at the gateway


def test_pages_get_the_ordinary_wait_and_only_the_resent_post_the_short_one(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    pages = ("/checkout", "/lab", "/lab/unsafe-checkout", "/orders")
    with proxied_shop(database_url, instance, read_timeout="1ms") as shop:  # shorter than any answer
        browser = browser_with_cart(shop.url)
        statuses = {page: submit(browser, f"{shop.url}{page}", None)[0] for page in pages}
        fields = form_fields(browser.open(f"{shop.url}/checkout").read().decode())
        paid, _ = submit(
            browser,
            f"{shop.url}/checkout",
            urlencode({**fields, "email": "shopper@example.com", "card_number": GOOD_CARD}).encode(),
        )
        sent = shop.sent("POST /checkout")
        wait_for(lambda: len(ledger.succeeded_charges()) == 1)
    assert statuses == dict.fromkeys(pages, 200)  # each page waited as long as it took
    assert (paid, sent.statuses) == (504, ("504", "504"))  # the payment's POST: 1 ms on each server
    assert len(ledger.orders()) == 1


def test_after_the_proxys_504_the_same_form_again_shows_the_order_charged_once(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    with proxied_shop(database_url, instance) as shop:
        browser, form = browser_at_checkout(shop.url)
        first = submit(browser, f"{shop.url}/checkout", form)
        timed_out = shop.sent("POST /checkout")
        # Pressed again once the first payment is done. Pressed while it is still at the slow card, the press
        # waits at the shop for it, and on a busy machine may outwait nginx's 1 s too: a second 504 (CI saw one).
        wait_for(lambda: "completed" in ledger.events())
        status, page = submit(browser, f"{shop.url}/checkout", form)  # the customer presses Pay again
    orders = ledger.orders()
    print(
        f"[{BACKEND}] Pay, then Pay again after the 504: first {first[0]} (nginx: {list(timed_out.statuses)}), "
        f"then {status}; orders={len(ledger.orders())} charges={len(ledger.succeeded_charges())}"
    )
    assert len(orders) == 1 and len(ledger.succeeded_charges()) == 1
    [order] = orders
    assert first[0] == 504 and "Gateway Time-out" in first[1]  # nginx's own page: neither server answered in 1 s
    assert timed_out.statuses == ("504", "504")
    assert status == 200
    assert f'data-testid="order-id">{order.public_id}<' in page
    assert 'data-testid="replay-notice"' in page  # already placed, charged once
    assert order.status == "paid"


def test_the_unsafe_checkout_behind_the_same_proxy_charges_one_press_twice(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    with proxied_shop(database_url, instance) as shop:
        browser = browser_with_cart(shop.url)
        fields = form_fields(browser.open(f"{shop.url}/lab/unsafe-checkout").read().decode(), "unsafe-checkout-form")
        form = urlencode({**fields, "email": "shopper@example.com", "card_number": SLOW_CARD}).encode()
        status, _page = submit(browser, f"{shop.url}/lab/unsafe-checkout", form)  # one press of Pay
        sent = shop.sent("POST /lab/unsafe-checkout")
        wait_for(lambda: len(ledger.succeeded_charges()) == 2)  # the copy nginx sent to the other server
    orders = ledger.orders()
    print(
        f"[{BACKEND}] one Pay on the unsafe checkout through nginx: client got {status}, sent to "
        f"{[shop.name_of(u) for u in sent.upstreams]}; orders={len(orders)} charges={len(ledger.succeeded_charges())}"
    )
    assert status == 504
    assert sorted(shop.name_of(upstream) for upstream in sent.upstreams) == ["app-1", "app-2"]
    assert len(orders) == 2 and {o.path for o in orders} == {"unsafe"}
    assert len({o.purchase_ref for o in orders}) == 1 and orders[0].purchase_ref  # two orders, one purchase
    assert len(ledger.succeeded_charges()) == 2


def kill_server(server: Server, worker: int) -> None:
    """SIGKILL the worker in the middle of the payment, then its master and every other worker: the server is gone."""
    os.kill(worker, signal.SIGKILL)
    server.process.kill()
    server.process.wait()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == server.process.pid:  # an orphaned worker
                os.kill(int(stat.parent.name), signal.SIGKILL)


def test_a_server_killed_behind_the_proxy_mid_payment_leaves_one_order_and_one_charge(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    """nginx waits 10 s here: the copy it sends is for the dead server's broken connection, not a timeout."""
    key = str(uuid.uuid4())
    body, headers = order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": key}
    with proxied_shop(database_url, instance, read_timeout="10s", settings=SHORT_LEASE) as shop:
        first: dict[str, object] = {}
        client = threading.Thread(target=lambda: first.update(reply=post_json(f"{shop.url}/api/orders", body, headers)))
        client.start()
        worker = wait_for(lambda: ledger.worker_of("gateway_called"))
        victim = next(row.server for row in ledger.rows(LabWorker) if row.worker.endswith(f":{worker}"))
        wait_for(ledger.charges)  # killed after the gateway charged: a retry must not charge again
        kill_server(shop.servers[SERVER_NAMES.index(victim)], worker)
        client.join(timeout=30)
        sent = shop.sent("POST /api/orders")
        lines: list[str] = []
        result = retry_client.place_order(
            shop.url,
            "demo-alice-token",
            body,
            key=key,
            max_attempts=20,
            base_delay=0.2,
            max_delay=1.0,
            log=lines.append,
            sleep=threading.Event().wait,
        )
    reply = first["reply"]
    print(
        f"[{BACKEND}] {victim} killed mid-payment: nginx sent the POST to "
        f"{[shop.name_of(u) for u in sent.upstreams]}, answers {list(sent.statuses)}; the client got "
        f"{getattr(reply, 'status', None)}; retry: " + " | ".join(lines)
    )
    orders, charges = ledger.orders(), ledger.succeeded_charges()
    assert len(orders) == 1 and len(charges) == 1, f"{len(orders)} orders, {len(charges)} charges"
    assert shop.name_of(sent.upstreams[0]) == victim
    assert sent.statuses[0] == "502"  # the dead server's connection broke: nginx sent the POST to the other
    assert len(sent.upstreams) == 2
    assert result.status == 201
    assert orders[0].status == "paid"
    assert result.json()["charge_id"] == charges[0].id
    assert "resumed" in ledger.events()  # the surviving server finished the dead one's payment


def test_an_api_client_behind_the_proxy_gets_409_from_the_other_server_then_its_one_order(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    """An API duplicate does not wait (no Prefer: wait): the other server answers 409 at once, nginx passes it on."""
    lines: list[str] = []
    with proxied_shop(database_url, instance) as shop:
        result = retry_client.place_order(
            shop.url,
            "demo-alice-token",
            order_body(card=SLOW_CARD),
            base_delay=0.2,
            max_delay=1.0,
            log=lines.append,
            sleep=threading.Event().wait,
        )
        first = shop.proxy.requests("POST /api/orders")[0]
    print(f"[{BACKEND}] the retry client through nginx: {' | '.join(lines)}; nginx's first: {list(first.statuses)}")
    orders, charges = ledger.orders(), ledger.succeeded_charges()
    assert len(orders) == 1 and len(charges) == 1, f"{len(orders)} orders, {len(charges)} charges"
    assert first.statuses == ("504", "409")  # the first server too slow, the other: in progress
    assert first.status == 409
    assert result.status == 201 and result.headers.get("Idempotent-Replayed") == "true"
    assert result.attempts[0].status == 409


def test_an_api_client_that_waits_longer_than_the_proxy_gets_a_problem_504_and_its_retry_the_order(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    """Prefer: wait=10 where the cap on waits is not below nginx's read timeout (make proxy sets it so): the other
    server waits for the first attempt, longer than nginx waits for it."""
    key = str(uuid.uuid4())
    body, headers = order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": key, "Prefer": "wait=10"}
    with proxied_shop(database_url, instance, settings={"CHECKOUT_MAX_WAIT_SECONDS": "10"}) as shop:
        first = post_json(f"{shop.url}/api/orders", body, headers)
        # At once, with the same key, until the answer is not the proxy's: the retry may itself outwait nginx
        # while the first attempt is still at the slow gateway (on a busy machine it often does).
        retries = [post_json(f"{shop.url}/api/orders", body, headers)]
        while retries[-1].status == 504 and len(retries) < 10:
            retries.append(post_json(f"{shop.url}/api/orders", body, headers))
        retry = retries[-1]
        timed_out = shop.proxy.requests("POST /api/orders")[0]
    print(
        f"[{BACKEND}] Prefer: wait=10 through nginx: {first.status} {first.headers.get('Content-Type')} "
        f"(nginx: {list(timed_out.statuses)}), then {retry.status}"
    )
    orders, charges = ledger.orders(), ledger.succeeded_charges()
    assert len(orders) == 1 and len(charges) == 1, f"{len(orders)} orders, {len(charges)} charges"
    assert timed_out.statuses == ("504", "504")  # neither server answered within nginx's 1 s
    assert first.status == 504
    assert first.headers["Content-Type"] == "application/problem+json"  # the proxy's own error, as the API's are
    assert first.json()["type"] == "gateway-timeout"
    assert first.headers["Retry-After"] == "1"  # when to try again, as the shop's own 409 and 503 say
    assert retry.status == 201 and retry.headers.get("Idempotent-Replayed") == "true"
    assert retry.json()["charge_id"] == charges[0].id


def test_an_api_body_over_the_limit_gets_the_proxys_413_as_problem_json(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    """nginx refuses it before any server sees it (client_max_body_size 64k): in the API's own form, as the shop
    would answer it, not nginx's HTML page."""
    with proxied_shop(database_url, instance) as shop:
        refused = post_json(f"{shop.url}/api/orders", {**order_body(), "padding": "x" * 70_000},
                            {**ALICE, "Idempotency-Key": str(uuid.uuid4())})  # fmt: skip
    assert refused.status == 413
    assert refused.headers["Content-Type"] == "application/problem+json"
    assert refused.json()["type"] == "payload-too-large"
    assert ledger.records() == [] and ledger.orders() == []


def _freeze(server: Server, signal_: signal.Signals) -> None:
    """SIGSTOP (or SIGCONT) a gunicorn server, master and workers: its socket still takes connections, and
    nothing answers them, as a hung server does."""
    subprocess.run(["pkill", f"-{signal_.name.removeprefix('SIG')}", "-P", str(server.process.pid)], check=False)
    os.kill(server.process.pid, signal_)


def test_a_read_from_a_hung_server_is_answered_by_the_other_after_a_few_seconds(
    app: Flask, database_url: str, instance: Path
) -> None:
    """A read is always safe to send again: nginx gives a server 5 s, then asks the other. (Each request here may
    take 15 s before it fails the test: nginx's default 60 s would.)"""
    paths = ("/api/products", "/api/orders/ord_none", "/cart", "/")
    with proxied_shop(database_url, instance) as shop:
        hung = shop.servers[0]
        _freeze(hung, signal.SIGSTOP)
        try:
            answers = [send("GET", f"{shop.url}{path}", headers=ALICE, timeout=15).status for path in paths]
        finally:
            _freeze(hung, signal.SIGCONT)
        reads = shop.proxy.requests("GET ")
    assert answers == [200, 404, 200, 200]
    hung_first = [read for read in reads if read.upstreams[0] == hung.url.removeprefix("http://")]
    assert hung_first and all(read.statuses[0] == "504" and len(read.upstreams) == 2 for read in hung_first)
