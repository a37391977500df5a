"""A workshop on one server: each student's seat is a customer of its own, with its own token, and its browser's
lab shows the seat's rows alone; a browser of no seat sees the whole shop (checkout/lab/seats.py)."""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner

from checkout.audit import IdempotencyEvent
from checkout.shop.models import Customer
from tests.helpers import (
    ANSWER_LOST_CARD,
    GOOD_CARD,
    SLOW_CARD,
    Ledger,
    add_to_cart,
    checkout_fields,
    form_fields,
    order_body,
    pay_in_browser,
    stock_of,
    stock_out_of_balance,
)
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


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def pay(client: FlaskClient, token: str, key: str, **changes: Any) -> Any:
    return client.post("/api/orders", json=order_body(**changes), headers={**bearer(token), "Idempotency-Key": key})


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


def catalog_skus(client: FlaskClient) -> set[str]:
    return set(re.findall(r'data-testid="stock-([A-Z0-9-]+)"', client.get("/").get_data(as_text=True)))


def test_a_seats_catalog_shows_its_own_last_lamp_in_place_of_the_class_lamp(app: Flask, runner: FlaskCliRunner) -> None:
    seats = make_seats(runner, 2)
    alone, nobody = app.test_client(), app.test_client()
    join(alone, seats["seat-01"][0])
    assert "LAST-S01" in catalog_skus(alone) and not {"LAST-01", "LAST-S02"} & catalog_skus(alone)
    assert "LAST-01" in catalog_skus(nobody) and not {"LAST-S01", "LAST-S02"} & catalog_skus(nobody)
    listed = {p["sku"] for p in nobody.get("/api/products", headers=bearer(seats["seat-02"][1])).get_json()}
    assert "LAST-S02" in listed and not {"LAST-01", "LAST-S01"} & listed  # the API lists it the same way
    assert stock_out_of_balance(app) == {}  # each seat's lamp is told to the stock's accounts


def test_a_seats_lamp_cannot_be_bought_by_any_other_customer(app: Flask, runner: FlaskCliRunner) -> None:
    seats = make_seats(runner, 2)
    neighbour = app.test_client()
    join(neighbour, seats["seat-02"][0])
    csrf = form_fields(neighbour.get("/").get_data(as_text=True), form_id=None)["csrf_token"]
    added = neighbour.post("/cart/items", data={"csrf_token": csrf, "sku": "LAST-S01", "quantity": "1"})
    assert added.status_code == 404
    lamp = [{"sku": "LAST-S01", "quantity": 1}]
    paid = pay(neighbour, seats["seat-02"][1], SAME_KEY, items=lamp)
    assert paid.status_code == 422 and "items[0].sku" in paid.get_json()["errors"]
    listed = pay(neighbour, seats["seat-02"][1], "another-key-for-seat-2", items=lamp, email="no email").get_json()
    assert {"email", "items[0].sku"} <= set(listed["errors"])  # with another error, it is named unknown all the same
    line = neighbour.put("/api/cart/lines/LAST-S01", json={"quantity": 1}, headers=bearer(seats["seat-02"][1]))
    assert line.status_code == 404
    assert stock_of(app, "LAST-S01") == 1


def test_two_windows_of_a_seat_race_for_its_own_lamp_and_the_neighbours_lamp_stays(
    app: Flask, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    seats = make_seats(runner, 2)
    first, second = app.test_client(), app.test_client()
    for window in (first, second):
        join(window, seats["seat-01"][0])
        add_to_cart(window, "LAST-S01")
    fields = [checkout_fields(window) for window in (first, second)]
    assert pay_in_browser(first, fields[0]).status_code == 303
    lost = pay_in_browser(second, fields[1])
    assert lost.status_code == 422 and "Last-One Lamp sold out" in lost.get_data(as_text=True)
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
    assert stock_of(app, "LAST-S01") == 0 and stock_of(app, "LAST-S02") == 1 and stock_of(app, "LAST-01") == 1
    assert stock_out_of_balance(app) == {}


def a_seat_that_paid_for_its_lamp(app: Flask, runner: FlaskCliRunner, card: str, status: int) -> FlaskClient:
    """Seat 1's browser, after its API token paid for its lamp with ``card`` and was answered ``status``."""
    seats = make_seats(runner, 1)
    window = app.test_client()
    join(window, seats["seat-01"][0])
    lamp = [{"sku": "LAST-S01", "quantity": 1}]
    assert pay(window, seats["seat-01"][1], SAME_KEY, items=lamp, card=card).status_code == status
    return window


def test_a_seat_puts_a_new_lamp_on_its_empty_shelf_and_the_stock_stays_balanced(
    app: Flask, runner: FlaskCliRunner
) -> None:
    window = a_seat_that_paid_for_its_lamp(app, runner, GOOD_CARD, 201)
    page = window.get("/lab/seat").get_data(as_text=True)
    assert 'data-testid="seat-new-lamp"' in page
    csrf = form_fields(page, form_id=None)["csrf_token"]
    assert window.post("/lab/seat/lamp", data={"csrf_token": csrf}).status_code == 303
    assert window.post("/lab/seat/lamp", data={"csrf_token": csrf}).status_code == 303  # a second press: no second
    assert stock_of(app, "LAST-S01") == 1
    assert stock_out_of_balance(app) == {}


def test_a_seat_cannot_restock_its_lamp_while_an_order_is_still_paying_for_it(
    app: Flask, runner: FlaskCliRunner
) -> None:
    """An order still pending may yet fail and put its lamp back: a new one beside it would make two of a kind."""
    window = a_seat_that_paid_for_its_lamp(app, runner, ANSWER_LOST_CARD, 503)
    page = window.get("/lab/seat").get_data(as_text=True)
    assert 'data-testid="seat-new-lamp"' not in page
    csrf = form_fields(window.get("/").get_data(as_text=True), form_id=None)["csrf_token"]  # pressed all the same
    assert window.post("/lab/seat/lamp", data={"csrf_token": csrf}).status_code == 303
    assert stock_of(app, "LAST-S01") == 0
    assert stock_out_of_balance(app) == {}


class Window:
    """One browser window of a seat on a served shop: it joined the seat and keeps its cookies."""

    def __init__(self, url: str, link: str) -> None:
        self.url, self.http = url, requests.Session()
        # A new connection a request: a kept-alive one that the server closes (gthread, after 2 s idle) at the
        # moment a request is sent on it is reset, and requests does not resend a POST.
        self.http.headers["Connection"] = "close"
        assert self.http.get(url + path_of(link), timeout=30).ok

    def add(self, sku: str) -> None:
        csrf = form_fields(self.http.get(self.url + "/", timeout=30).text, form_id=None)["csrf_token"]
        added = self.http.post(
            self.url + "/cart/items", data={"csrf_token": csrf, "sku": sku, "quantity": "1"}, allow_redirects=False
        )
        assert added.status_code == 303, added.text

    def checkout(self) -> dict[str, str]:
        return form_fields(self.http.get(self.url + "/checkout", timeout=30).text)

    def pay(self, fields: dict[str, str], card: str) -> int:
        data = {**fields, "email": "student@example.com", "card_number": card}
        return self.http.post(self.url + "/checkout", data=data, allow_redirects=False, timeout=60).status_code

    def get(self, path: str) -> requests.Response:
        return self.http.get(self.url + path, timeout=30)


def at_once(*calls: Callable[[], Any]) -> list[Any]:
    """Each call in a thread of its own, started together; their results in order (a call's exception raised)."""
    ready = threading.Barrier(len(calls))

    def run(call: Callable[[], Any]) -> Any:
        ready.wait(timeout=30)
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return [future.result(timeout=180) for future in [pool.submit(run, call) for call in calls]]


@pytest.mark.server
def test_twenty_seats_at_once_on_a_served_shop_each_see_their_own_rows_and_lamp_alone(
    database_url: str, runner: FlaskCliRunner, ledger: Ledger, tmp_path: Path
) -> None:
    """The classroom of docs/workshop.md: gunicorn with 8 threads a worker, the trusted host set, 20 seats, every
    student at once: the same API request with the same key, then exercises 1 (Pay pressed twice, the guard off),
    2 (the answer lost, Pay again) and 10 (two windows of the seat racing for its lamp)."""
    seats = make_seats(runner, SEATS)
    settings = {"GUNICORN_THREADS": "8", "CHECKOUT_TRUSTED_HOSTS": "127.0.0.1"}
    with gunicorn(database_url, tmp_path / "instance", settings=settings) as [server]:

        def student(name: str, link: str, token: str) -> dict[str, Any]:
            window, private = Window(server.url, link), Window(server.url, link)
            api = requests.post(
                server.url + "/api/orders",
                json=order_body(),
                headers={**bearer(token), "Idempotency-Key": SAME_KEY},
                timeout=60,
            )
            window.add("MUG-01")
            fields = window.checkout()
            double = at_once(lambda: window.pay(fields, SLOW_CARD), lambda: window.pay(fields, SLOW_CARD))
            window.add("MUG-01")
            fields = window.checkout()
            lost = [window.pay(fields, ANSWER_LOST_CARD), window.pay(fields, ANSWER_LOST_CARD)]
            lamp = "LAST-S" + name.removeprefix("seat-")
            for shopper in (window, private):
                shopper.add(lamp)
            forms = [window.checkout(), private.checkout()]
            race = at_once(lambda: window.pay(forms[0], SLOW_CARD), lambda: private.pay(forms[1], SLOW_CARD))
            return {
                "api": api.status_code,
                "double": sorted(double),
                "lost": lost,
                "race": sorted(race),
                "lab": window.get("/api/lab/ledger").json(),
                "lamps": re.findall(r'data-sku="(LAST-[^"]+)"', window.get("/lab").text),
            }

        students = [functools.partial(student, name, *seat) for name, seat in seats.items()]
        seen = dict(zip(seats, at_once(*students), strict=True))  # every student at once; a failure raised here
        room = requests.get(server.url + "/lab/room", timeout=30).text

    assert sorted(seen) == sorted(seats)
    for name, got in seen.items():
        public_id = "cus_seat_" + name.removeprefix("seat-")
        assert got["api"] == 201
        assert got["double"] in ([202, 303], [303, 303])  # the second: still processing, or replayed
        assert got["lost"] == [503, 303]  # could not confirm; Pay again: the paid order
        assert got["race"] == [303, 422]  # one window gets the lamp, the other is told it sold out
        lab = got["lab"]
        assert {o["customer"] for o in lab["orders"]} == {public_id} and len(lab["orders"]) == 4
        assert {o["status"] for o in lab["orders"]} == {"paid"}
        assert {r["customer"] for r in lab["records"]} == {public_id}
        assert lab["totals"]["succeeded_charges"] == 4 and len(lab["charges"]) == 4  # one charge an order
        assert got["lamps"] == ["LAST-S" + name.removeprefix("seat-")]  # its own lamp, no one else's
    assert len(ledger.orders()) == 4 * SEATS and len(ledger.succeeded_charges()) == 4 * SEATS
    assert room.count('data-testid="room-seat"') == SEATS
    assert room.count('<td data-testid="room-purchases">4</td>') == SEATS  # four purchases each, counted per seat
