"""A workshop on one server: each student's seat is a customer of its own, with its own token, and its browser's
lab shows the seat's rows alone; a browser of no seat sees the whole shop (checkout/lab/seats.py)."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.audit import IdempotencyEvent
from checkout.shop.models import Customer
from tests.helpers import Ledger, order_body
from tests.servers import gunicorn

SEATS = 20
SAME_KEY = "one-key-that-every-seat-sends"
LINE = re.compile(r"^(seat-\d\d)  (\S+)  token: (\S+)$")


def make_seats(runner: FlaskCliRunner, count: int) -> dict[str, tuple[str, str]]:
    """Each seat's (join link, token), as the teacher's command prints them."""
    result = runner.invoke(args=["workshop", "seats", str(count)])
    assert result.exit_code == 0, result.output
    found = {m[1]: (m[2], m[3]) for line in result.output.splitlines() if (m := LINE.match(line))}
    assert len(found) == count, result.output
    return found


def path_of(link: str) -> str:
    """The path of a printed join link (the command prints it on CHECKOUT_SHOP_URL; the tests' shops are elsewhere)."""
    return "/" + link.split("/", 3)[3]


def join(client: FlaskClient, link: str) -> None:
    assert client.get(path_of(link)).status_code == 303


def pay(client: FlaskClient, token: str, key: str) -> Any:
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key}
    return client.post("/api/orders", json=order_body(), headers=headers)


def test_the_seats_command_prints_a_join_link_and_a_token_per_seat_the_same_every_time(
    runner: FlaskCliRunner,
) -> None:
    first = make_seats(runner, 3)
    assert sorted(first) == ["seat-01", "seat-02", "seat-03"]
    assert make_seats(runner, 3) == first  # run again: the same links and tokens, no new customers
    assert len({token for _link, token in first.values()}) == 3


def test_a_seats_token_pays_as_the_seat(client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger) -> None:
    _link, token = make_seats(runner, 1)["seat-01"]
    assert pay(client, token, SAME_KEY).status_code == 201
    [order] = ledger.orders()
    [customer] = ledger.rows(Customer, Customer.id == order.customer_id)
    assert customer.public_id == "cus_seat_01"


def test_a_join_link_with_a_wrong_code_is_404_and_the_browser_stays_who_it_was(
    client: FlaskClient, runner: FlaskCliRunner
) -> None:
    link, _token = make_seats(runner, 1)["seat-01"]
    path = path_of(link)
    assert client.get(path[:-1] + "x").status_code == 404
    assert client.get(path[:-1] + "é").status_code == 404
    assert client.get(path.replace("/join/1/", "/join/2/")).status_code == 404  # no seat 2 was made
    assert client.get("/lab/seat").get_data(as_text=True).count('data-testid="no-seat"') == 1


def test_a_browser_that_joined_a_seat_sees_its_token_and_only_its_rows_in_the_lab(
    app: Flask, runner: FlaskCliRunner
) -> None:
    seats = make_seats(runner, 2)
    alone, neighbour = app.test_client(), app.test_client()
    join(alone, seats["seat-01"][0])
    join(neighbour, seats["seat-02"][0])
    assert pay(alone, seats["seat-01"][1], SAME_KEY).status_code == 201
    assert pay(neighbour, seats["seat-02"][1], SAME_KEY).status_code == 201  # the same key: another scope

    assert seats["seat-01"][1] in alone.get("/lab/seat").get_data(as_text=True)
    mine = alone.get("/api/lab/ledger").get_json()
    assert {r["customer"] for r in mine["records"]} == {"cus_seat_01"}
    assert [o["customer"] for o in mine["orders"]] == ["cus_seat_01"]
    assert len(mine["charges"]) == 1 and mine["charges"][0]["order_id"] == mine["orders"][0]["id"]
    assert {e["customer"] for e in mine["events"]} == {"cus_seat_01"}
    assert mine["totals"]["orders"] == 1
    everyone = app.test_client().get("/api/lab/ledger").get_json()  # a browser of no seat: the whole shop
    assert everyone["totals"]["orders"] == 2 and len(everyone["charges"]) == 2
    page = alone.get("/lab").get_data(as_text=True)
    assert 'data-testid="seat-banner"' in page and "seat-01" in page
    requests_under_the_key = alone.get(f"/api/lab/requests?key={SAME_KEY}").get_json()
    assert [r["customer"] for r in requests_under_the_key] == ["cus_seat_01"]
    looked_up = alone.get(f"/lab?key={SAME_KEY}").get_data(as_text=True)
    assert mine["orders"][0]["id"] in looked_up and everyone["orders"][0]["id"] not in looked_up


def test_a_seats_mailbox_shows_the_mail_of_its_own_orders_alone(app: Flask, runner: FlaskCliRunner) -> None:
    seats = make_seats(runner, 2)
    alone, neighbour = app.test_client(), app.test_client()
    join(alone, seats["seat-01"][0])
    mine = pay(alone, seats["seat-01"][1], SAME_KEY).get_json()["id"]
    theirs = pay(neighbour, seats["seat-02"][1], SAME_KEY).get_json()["id"]
    mailbox = alone.get("/lab/mailbox").get_data(as_text=True)
    assert mine in mailbox and theirs not in mailbox
    everyone = app.test_client().get("/lab/mailbox").get_data(as_text=True)
    assert mine in everyone and theirs in everyone


def test_a_seats_purge_purges_its_own_keys_and_leaves_its_neighbours(
    app: Flask, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    seats = make_seats(runner, 2)
    alone, neighbour = app.test_client(), app.test_client()
    join(alone, seats["seat-01"][0])
    assert pay(alone, seats["seat-01"][1], SAME_KEY).status_code == 201
    assert pay(neighbour, seats["seat-02"][1], SAME_KEY).status_code == 201
    page = alone.get("/lab").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', page)
    assert csrf is not None
    assert alone.post("/lab/purge-keys", data={"csrf_token": csrf[1]}).status_code == 303
    assert [r.customer for r in ledger.records()] == ["cus_seat_02"]
    assert {e.customer for e in ledger.rows(IdempotencyEvent)} == {"cus_seat_02"}  # the purged keys' trail went


@pytest.mark.server
def test_twenty_seats_paying_at_once_on_a_served_shop_each_see_their_own_order_alone(
    database_url: str, runner: FlaskCliRunner, ledger: Ledger, tmp_path: Path
) -> None:
    """The classroom of docs/workshop.md: gunicorn with 8 threads a worker, the trusted host set, 20 seats; every
    student sends the same request with the same key at the same moment."""
    seats = make_seats(runner, SEATS)
    ready = threading.Barrier(SEATS)
    seen: dict[str, tuple[int, dict[str, Any]]] = {}
    settings = {"GUNICORN_THREADS": "8", "CHECKOUT_TRUSTED_HOSTS": "127.0.0.1"}
    with gunicorn(database_url, tmp_path / "instance", settings=settings) as [server]:

        def student(name: str, link: str, token: str) -> None:
            browser = requests.Session()
            assert browser.get(server.url + path_of(link), timeout=30).ok
            ready.wait(timeout=30)
            paid = requests.post(
                server.url + "/api/orders",
                json=order_body(),
                headers={"Authorization": f"Bearer {token}", "Idempotency-Key": SAME_KEY},
                timeout=60,
            )
            seen[name] = (paid.status_code, browser.get(server.url + "/api/lab/ledger", timeout=30).json())

        threads = [threading.Thread(target=student, args=(name, *seat)) for name, seat in seats.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        room = requests.get(server.url + "/lab/room", timeout=30).text

    assert len(seen) == SEATS and {status for status, _ledger in seen.values()} == {201}
    for name, (_status, lab) in seen.items():
        public_id = "cus_seat_" + name.removeprefix("seat-")
        assert [o["customer"] for o in lab["orders"]] == [public_id]
        assert {r["customer"] for r in lab["records"]} == {public_id}
        assert len(lab["charges"]) == 1 and lab["totals"]["succeeded_charges"] == 1
    assert len(ledger.orders()) == SEATS and len(ledger.succeeded_charges()) == SEATS
    assert room.count('data-testid="room-seat"') == SEATS
    assert room.count('<td data-testid="room-purchases">1</td>') == SEATS  # one purchase each, counted per seat
