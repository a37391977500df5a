"""Real races: many threads, one key, a real threaded server on a real database."""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import LiveServer
from tests.helpers import ALICE, BOB, SLOW_CARD, Ledger, browser_at_checkout, order_body, race, wait_for
from tests.http import post_json, send

pytestmark = pytest.mark.slow


def test_twenty_threads_with_one_key_make_one_order_and_one_charge(live_server: LiveServer, ledger: Ledger) -> None:
    key = str(uuid.uuid4())
    replies = race(
        20,
        lambda _i: post_json(
            f"{live_server.url}/api/orders", order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": key}
        ),
    )
    statuses = sorted(r.status for r in replies)
    assert set(statuses) <= {201, 409}, statuses
    created = [r for r in replies if r.status == 201]
    assert len(created) >= 1
    assert len({r.body for r in created}) == 1
    assert all("Retry-After" in r.headers for r in replies if r.status == 409)
    assert len(ledger.orders()) == 1
    assert len(ledger.succeeded_charges()) == 1
    # Once the first finishes, every retry is a replay of the same body.
    assert (
        post_json(f"{live_server.url}/api/orders", order_body(card=SLOW_CARD), {**ALICE, "Idempotency-Key": key}).body
        == created[0].body
    )


def test_the_same_key_racing_from_two_customers_gives_two_independent_orders(
    live_server: LiveServer, ledger: Ledger
) -> None:
    key = str(uuid.uuid4())
    tokens = [ALICE, BOB]
    replies = race(
        2,
        lambda i: post_json(
            f"{live_server.url}/api/orders", order_body(card=SLOW_CARD), {**tokens[i], "Idempotency-Key": key}
        ),
    )
    assert [r.status for r in replies] == [201, 201]
    alice, bob = (r.json() for r in replies)
    assert alice["id"] != bob["id"]
    assert send("GET", f"{live_server.url}/api/orders/{alice['id']}", headers=BOB).status == 404
    assert len(ledger.orders()) == 2 and len(ledger.succeeded_charges()) == 2


def test_two_browser_submits_of_one_form_without_javascript_charge_once(
    live_server: LiveServer, ledger: Ledger
) -> None:
    """What a double-click does with JavaScript off: the same form POSTed twice at once."""
    browser, form = browser_at_checkout(live_server.url)

    finals = race(2, lambda _i: browser.open(f"{live_server.url}/checkout", data=form).geturl())
    assert live_server.post_count("/checkout") == 2
    [order] = ledger.orders()
    assert finals == [f"{live_server.url}/orders/{order.public_id}"] * 2  # the same order, twice
    assert ledger.events().count("replayed") == 1  # one of them was answered from the stored record
    assert len(ledger.succeeded_charges()) == 1


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_BROWSER_WAIT_SECONDS": 0.3, "CHECKOUT_SLOW_CARD_SECONDS": 3}])
def test_a_second_submit_that_outwaits_its_bound_gets_a_self_checking_page_that_ends_on_the_order(
    live_server: LiveServer, ledger: Ledger, app_overrides: dict
) -> None:
    browser, form = browser_at_checkout(live_server.url)

    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(lambda: browser.open(f"{live_server.url}/checkout", data=form).read())
        wait_for(ledger.records)  # the first submit has claimed the key
        second = browser.open(f"{live_server.url}/checkout", data=form)  # waits 0.3 s, then gives up
        page = second.read().decode()
        assert second.status == 202
        assert 'data-testid="processing-notice"' in page
        # The page looks again by itself every second, JavaScript or not: the browser follows Refresh.
        refresh = re.fullmatch(r"1; url=(/checkout/pending/\S+)", second.headers.get("Refresh", ""))
        assert refresh is not None and f'<a href="{refresh.group(1)}" id="check-now">' in page  # "Check now", too
        first.result(timeout=30)  # the first submit finishes its payment

    final = browser.open(f"{live_server.url}{refresh.group(1)}")  # what the page's refresh loads
    [order] = ledger.orders()
    assert final.geturl() == f"{live_server.url}/orders/{order.public_id}"
    assert 'data-testid="replay-notice"' in final.read().decode()
    assert len(ledger.succeeded_charges()) == 1
