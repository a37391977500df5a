"""The back button after paying, as a shopper really presses it in Chromium."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.shopping import add_to_cart, fill_checkout
from tests.conftest import LiveServer
from tests.helpers import GOOD_CARD, Ledger


def test_back_after_paying_shows_the_cart_was_paid_and_pay_shows_the_same_order(
    page: Page, live_server: LiveServer, ledger: Ledger
) -> None:
    add_to_cart(page, live_server.url)
    fill_checkout(page, live_server.url, GOOD_CARD)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    [order] = ledger.orders()

    page.go_back()  # the browser asks for the checkout again (the page may not be cached: no-store)
    expect(page.get_by_test_id("already-paid")).to_be_visible()
    expect(page.get_by_label("Email")).to_have_value("shopper@example.com")
    page.get_by_label("Card number").fill(GOOD_CARD)
    page.get_by_test_id("pay-button").click()

    expect(page.get_by_test_id("replay-notice")).to_be_visible()
    expect(page.get_by_test_id("order-id")).to_have_text(order.public_id)
    assert len(ledger.orders()) == 1
    assert len(ledger.succeeded_charges()) == 1
