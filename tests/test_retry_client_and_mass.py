"""The client half of the pattern against a live server: the retry client, its
wrong-way switch, and the mass test."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
import sqlalchemy as sa

from checkout import client
from checkout.audit import IdempotencyRecord
from checkout.database import utcnow
from checkout.extensions import db
from checkout.lab import mass
from tests.conftest import LiveServer
from tests.helpers import (
    ANSWER_LOST_CARD,
    GOOD_CARD,
    SLOW_CARD,
    UNAVAILABLE_CARD,
    Ledger,
    claim_as_a_dying_worker,
    order_body,
)
from tests.payments import payment_body
from tests.servers import free_port

TOKEN = "demo-alice-token"


def no_sleep(waits: list[float]):
    return waits.append


@pytest.mark.parametrize("card", [UNAVAILABLE_CARD, ANSWER_LOST_CARD])
def test_the_client_retries_a_503_with_the_same_key_and_is_charged_once(
    live_server: LiveServer, ledger: Ledger, card: str
) -> None:
    waits: list[float] = []
    result = client.place_order(live_server.url, TOKEN, order_body(card=card), sleep=no_sleep(waits))
    assert [a.status for a in result.attempts] == [503, 201]
    assert len({a.key for a in result.attempts}) == 1
    assert waits and waits[0] >= 1  # Retry-After: 1
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1


def test_the_wrong_way_a_new_key_per_retry_charges_on_every_retry(live_server: LiveServer, ledger: Ledger) -> None:
    result = client.place_order(
        live_server.url, TOKEN, order_body(card=ANSWER_LOST_CARD), wrong_way=True, max_attempts=3, sleep=no_sleep([])
    )
    # Each new key is a new order with a new gateway key: each is charged, and each answer is lost again.
    assert [a.status for a in result.attempts] == [503, 503, 503]
    assert len({a.key for a in result.attempts}) == 3
    assert len(ledger.orders()) == 3
    assert len(ledger.succeeded_charges()) == 3  # one purchase, three charges: what the same key prevents


def test_the_client_never_retries_a_4xx_other_than_409(live_server: LiveServer, ledger: Ledger) -> None:
    result = client.place_order(live_server.url, TOKEN, order_body(card="4242 4242 4242 4241"), sleep=no_sleep([]))
    assert [a.status for a in result.attempts] == [422]
    assert ledger.records() == []


def test_the_client_ends_on_a_final_409_and_retries_only_a_409_that_says_try_again(
    live_server: LiveServer, ledger: Ledger
) -> None:
    body = payment_body(GOOD_CARD)
    paid = client.place_order(live_server.url, TOKEN, body, path="/api/payments", sleep=no_sleep([]))
    assert paid.status == 201
    waits: list[float] = []
    again = client.place_order(live_server.url, TOKEN, body, path="/api/payments", sleep=no_sleep(waits))
    # Another key for an order already paid: final, stored under that key; every retry would get the same.
    assert [a.status for a in again.attempts] == [409] and waits == []
    assert again.json()["type"].endswith("order-already-paid")
    assert len(ledger.succeeded_charges()) == 1


def test_the_client_honours_retry_after_on_409(live_server: LiveServer, ledger: Ledger) -> None:
    key = "held-by-another-worker-01"
    body = order_body()
    claim_as_a_dying_worker(live_server.app, key, body, lease_seconds=60)
    app = live_server.app
    waits: list[float] = []

    def wait_and_let_the_lease_expire(seconds: float) -> None:
        waits.append(seconds)
        with app.app_context():  # meanwhile the other worker dies and its lease runs out
            db.session.execute(sa.update(IdempotencyRecord).values(locked_until=utcnow() - timedelta(seconds=1)))
            db.session.commit()
            db.session.remove()

    result = client.place_order(
        live_server.url, TOKEN, body, key=key, sleep=wait_and_let_the_lease_expire, rng=random.Random(1)
    )
    assert [a.status for a in result.attempts] == [409, 201]
    assert waits[0] >= 1  # the Retry-After of the conflict (a quick card: 1 s), never sooner
    assert len(ledger.succeeded_charges()) == 1


def test_the_client_retries_after_giving_up_on_a_slow_answer(live_server: LiveServer, ledger: Ledger) -> None:
    result = client.place_order(
        live_server.url, TOKEN, order_body(card=SLOW_CARD), timeout=0.3, max_attempts=30, base_delay=0.1, max_delay=0.3
    )
    assert result.attempts[0].status is None  # the answer was dropped by the client's timeout
    assert result.status == 201
    assert len(ledger.succeeded_charges()) == 1


def test_the_client_prints_each_attempt(live_server: LiveServer, capsys: pytest.CaptureFixture[str]) -> None:
    code = client.main(["--url", live_server.url, "--card", GOOD_CARD])
    assert code == 0
    assert "attempt 1" in capsys.readouterr().out


def test_the_client_prints_the_whole_key_so_it_can_be_pasted_into_the_lab(
    live_server: LiveServer, ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    assert client.main(["--url", live_server.url, "--card", GOOD_CARD]) == 0
    [record] = ledger.records()
    assert f"key={record.key} " in capsys.readouterr().out


def test_the_mass_test_is_exact_on_the_safe_api(live_server: LiveServer, ledger: Ledger) -> None:
    report = mass.run(live_server.url, payments=40, clients=4, unsafe=False, timeout=1.0, seed=3)
    assert report["unfinished"] == 0
    assert report["difference_cents"] == 0
    assert report["charged_cents"] == sum(c.amount_cents for c in ledger.succeeded_charges())


def test_the_mass_test_shows_the_money_charged_twice_on_the_unsafe_path(live_server: LiveServer) -> None:
    report = mass.run(live_server.url, payments=40, clients=4, unsafe=True, timeout=1.0, seed=3)
    assert int(report["difference_cents"]) > 0  # type: ignore[call-overload]


def test_the_mass_test_paced_starts_no_more_payments_a_second_than_asked(
    live_server: LiveServer, ledger: Ledger
) -> None:
    """Exercise 12's run lasts a minute at --per-second 5. Here 5 clients could start 5 payments at once; at 4 a
    second, the fifth starts a second after the run did, and its order is made after that (however long the
    first took to be answered: the bound is from the run's start, not from the first order)."""
    before = utcnow()
    report = mass.run(live_server.url, payments=5, clients=5, unsafe=False, timeout=5.0, seed=3, per_second=4)
    assert report["difference_cents"] == 0
    made = sorted(order.created_at for order in ledger.orders())
    assert len(made) == 5 and (made[-1] - before).total_seconds() >= 1.0


def test_the_mass_test_against_a_stopped_shop_says_so_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert mass.main(["--url", url, "--payments", "3"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"no shop answers at {url}") and "make run" in err
