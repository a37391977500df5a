"""In the browser, the moments each layer of the defence exists for.

Each test sets up the one situation in which its layer, and no other, decides
the outcome, so it fails when that layer is removed (``make mutants`` checks
that it does). Those that look inside the shop (the ledger, a hook in its code)
run only against the shop the tests start; the others run against any shop with
``--base-url``.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from flask import Flask
from playwright.sync_api import Page, expect

from tests.browser.shopping import add_to_cart, capture_form, fill_checkout, listed_orders, resubmit
from tests.conftest import LiveServer
from tests.helpers import GOOD_CARD, SLOW_CARD, Ledger, SameInstantLooks, take_over_the_payment, wait_for

ORDER_URL = re.compile(r"/orders/ord_[0-9a-f]+$")


def test_two_tabs_that_pay_at_the_same_instant_both_end_on_the_one_order(
    page: Page, live_server: LiveServer, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The atomic claim: both submits find no record, and the INSERT alone decides which one pays."""
    looks = SameInstantLooks(2).install(monkeypatch)
    add_to_cart(page, live_server.url)
    fill_checkout(page, live_server.url, SLOW_CARD)
    second_tab = page.context.new_page()
    fill_checkout(second_tab, live_server.url, SLOW_CARD)  # the same cart version: the same key
    page.get_by_test_id("pay-button").click(no_wait_after=True)
    assert live_server.wait_for_posts("/checkout", 1)
    second_tab.get_by_test_id("pay-button").click(no_wait_after=True)
    answers = live_server.wait_for_answers("/checkout", 2)

    assert looks.met  # both looked before either claimed: the claim had to decide
    [order] = ledger.orders()
    # The loser of the claim waited for the winner and was answered with its order, like the winner.
    assert answers == [("303", f"/orders/{order.public_id}")] * 2
    for tab in (page, second_tab):
        expect(tab.get_by_test_id("order-id")).to_have_text(order.public_id)
        expect(tab.get_by_test_id("order-status")).to_have_text("paid")
    assert ledger.events().count("claimed") == 1
    assert len(ledger.succeeded_charges()) == 1


def test_the_same_payment_key_with_another_email_gets_the_mismatch_page(page: Page, shop_url: str) -> None:
    """The fingerprint: a key already used is a retry only if the form is the same."""
    add_to_cart(page, shop_url)
    fill_checkout(page, shop_url, GOOD_CARD)
    form = capture_form(page)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    order_id = page.get_by_test_id("order-id").inner_text()

    resubmit(page, shop_url, {**form, "email": "someone.else@example.com"})  # the paid form, edited
    expect(page.get_by_role("heading", name="This payment was already started with other details")).to_be_visible()
    expect(page.get_by_test_id("error-message")).to_contain_text("Nothing new was charged")
    expect(page.get_by_test_id("replay-notice")).to_have_count(0)
    assert listed_orders(page, shop_url) == [order_id]


def test_a_second_form_for_the_same_cart_with_another_key_ends_on_the_same_order(
    page: Page, live_server: LiveServer, ledger: Ledger
) -> None:
    """The orders' unique (cart, cart version): another key for a cart being paid cannot order it again."""
    add_to_cart(page, live_server.url)
    fill_checkout(page, live_server.url, SLOW_CARD)
    forged = {**capture_form(page), "idempotency_key": str(uuid.uuid4())}  # a second tab's form, key changed
    page.get_by_test_id("pay-button").click(no_wait_after=True)
    wait_for(ledger.orders)  # the first payment's order exists; the slow card is still charging it

    second_tab = page.context.new_page()
    second_tab.goto(f"{live_server.url}/cart")
    resubmit(second_tab, live_server.url, forged)
    expect(page.get_by_test_id("order-status")).to_have_text("paid", timeout=15_000)
    order_id = page.get_by_test_id("order-id").inner_text()
    # The second form's key has no record, so only the orders table could tell it that this cart is being paid.
    expect(second_tab).to_have_url(ORDER_URL, timeout=15_000)
    expect(second_tab.get_by_test_id("order-id")).to_have_text(order_id)
    assert [o.public_id for o in ledger.orders()] == [order_id]
    assert len(ledger.succeeded_charges()) == 1


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_SLOW_CARD_SECONDS": 3}])
def test_a_payment_whose_lease_was_taken_over_mid_charge_writes_nothing(
    page: Page, app: Flask, live_server: LiveServer, ledger: Ledger, app_overrides: dict[str, Any]
) -> None:
    """The owner check: a worker that lost its lease while it waited on the gateway records nothing."""
    add_to_cart(page, live_server.url)
    fill_checkout(page, live_server.url, SLOW_CARD)
    page.get_by_test_id("pay-button").click(no_wait_after=True)
    wait_for(lambda: "gateway_called" in ledger.events())  # the worker is inside the gateway call (3 s)
    new_owner = take_over_the_payment(app)  # its lease ran out; another worker holds the payment now

    [(status, _location)] = live_server.wait_for_answers("/checkout", 1)
    assert status == "202"  # told "still processing", not shown an order it no longer owns
    expect(page.get_by_test_id("processing-notice")).to_be_visible()
    [record] = ledger.records()
    assert (record.state, record.locked_by, record.response_status) == ("in_progress", new_owner.owner, None)
    [order] = ledger.orders()
    assert order.status == "pending"  # the charge it got is the new owner's to record
    assert "lease_lost" in ledger.events()
