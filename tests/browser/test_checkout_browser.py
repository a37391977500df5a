"""The checkout in Chromium, against the shop these tests start (its ledger, and settings of its own).

The double-click tests a QA engineer copies, which run against any shop, are in qa/ (qa/README.md): the suite runs
them against a served shop (tests/browser/test_qa_folder.py). These are the ones that look inside the shop.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.shopping import centre_of, fill_checkout, pay_and_lose_the_answer
from tests.conftest import LiveServer
from tests.helpers import ANSWER_LOST_CARD, SLOW_CARD, Ledger, wait_for


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_BROWSER_WAIT_SECONDS": 0.3, "CHECKOUT_SLOW_CARD_SECONDS": 3}])
def test_without_javascript_the_still_processing_page_ends_on_the_order_by_itself(
    browser: Browser, live_server: LiveServer, ledger: Ledger, app_overrides: dict[str, Any]
) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    add_to_cart_no_js(page, live_server.url)
    fill_checkout(page, live_server.url, SLOW_CARD)
    x, y = centre_of(page, "pay-button")
    page.mouse.click(x, y)
    wait_for(lambda: "gateway_called" in ledger.events())  # the first submit is at the gateway for 3 s
    page.mouse.click(x, y)  # the second waits 0.3 s for it, then gets the page that looks again
    expect(page.get_by_test_id("processing-notice")).to_be_visible()
    expect(page.get_by_test_id("replay-notice")).to_be_visible(timeout=15_000)  # nothing pressed, no script ran
    [order] = ledger.orders()
    expect(page.get_by_test_id("order-id")).to_have_text(order.public_id)
    assert len(ledger.succeeded_charges()) == 1
    page.go_back()  # the processing page replaced itself: Back is the checkout, not a form to resend
    expect(page).to_have_url(f"{live_server.url}/checkout")
    context.close()


def add_to_cart_no_js(page: Page, base_url: str) -> None:
    page.goto(f"{base_url}/")
    page.get_by_role("button", name="Add to cart").first.click()
    expect(page.get_by_test_id("cart-count")).to_have_text("1")


def test_a_lost_gateway_answer_shows_try_again_and_the_second_pay_shows_the_paid_order(
    page: Page, live_server: LiveServer, ledger: Ledger
) -> None:
    key = pay_and_lose_the_answer(page, live_server.url, ANSWER_LOST_CARD)
    expect(page.get_by_test_id("idempotency-key")).to_have_text(key)  # the same payment, not a new one
    assert len(ledger.charges()) == 1  # the gateway charged; the shop never heard
    expect(page.get_by_label("Card number")).to_have_value("")  # never echoed back into the page
    page.get_by_label("Card number").fill(ANSWER_LOST_CARD)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    [order] = ledger.orders()
    expect(page.get_by_test_id("order-id")).to_have_text(order.public_id)
    assert len(ledger.charges()) == 1
