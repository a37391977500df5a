"""The double-click tests people copy: each ends in one order and one charge.

A double-submit test must prove that the submits it claims really reached the
server: a second press sent too soon (``dblclick()``) is cancelled by Chromium
with the first navigation, and one POST proves nothing about the server. So each
test holds the first POST open with the slow card, presses again by position
once the server has it, and counts the POSTs the server received.

Tests that take ``shop_url`` and no ``live_server`` or ``ledger`` run against any shop too
(``pytest tests/browser --base-url URL``): they assert what the shopper sees, and count what the shop
received and charged through the lab's JSON (``ShopUnderTest``), so the shop must have its lab on.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.browser.shopping import (
    ShopUnderTest,
    add_to_cart,
    capture_form,
    centre_of,
    fill_checkout,
    listed_orders,
    pay_and_lose_the_answer,
    resubmit,
)
from tests.conftest import LiveServer
from tests.helpers import ANSWER_LOST_CARD, GOOD_CARD, SLOW_CARD, Ledger, wait_for

ORDER_URL = re.compile(r"/orders/ord_[0-9a-f]+")


@pytest.mark.parametrize("lang", ["en", "uk"])
def test_a_double_click_on_pay_sends_one_post_and_places_one_order_and_one_charge(
    page: Page, shop_url: str, lang: str
) -> None:
    shop = ShopUnderTest(page, shop_url)
    add_to_cart(page, shop_url, lang=lang)
    fill_checkout(page, shop_url, SLOW_CARD, lang=lang)
    key = page.get_by_test_id("idempotency-key").inner_text()
    x, y = centre_of(page, "pay-button")
    page.mouse.click(x, y)
    # The slow card holds the first POST at the server: a second press now would be a second POST,
    # if the button let it through (pressed sooner, Chromium would cancel the first POST instead).
    shop.wait_for_requests(key, 1)
    page.mouse.click(x, y)  # the second press of the double click lands on the disabled button
    expect(page).to_have_url(ORDER_URL, timeout=15_000)
    expect(page.locator("html")).to_have_attribute("lang", lang)
    expect(page.get_by_test_id("order-status")).to_have_attribute("data-status", "paid")
    if lang == "en":
        expect(page.get_by_test_id("order-status")).to_have_text("paid")
    else:  # the page really is in Ukrainian, not English under another lang attribute
        expect(page.get_by_test_id("order-status")).not_to_have_text("paid")
    assert len(shop.requests_under(key)) == 1  # the button guard: the second press sent nothing
    [order] = shop.orders_under(key)
    expect(page.get_by_test_id("order-id")).to_have_text(order["id"])
    assert len(shop.succeeded_charges_of(order["id"])) == 1


def test_without_javascript_two_real_submits_charge_once_and_show_the_replay(browser: Browser, shop_url: str) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    shop = ShopUnderTest(page, shop_url)
    add_to_cart_no_js(page, shop_url)
    fill_checkout(page, shop_url, SLOW_CARD)
    key = page.get_by_test_id("idempotency-key").inner_text()
    x, y = centre_of(page, "pay-button")
    page.mouse.click(x, y)
    # Press again once the first POST has reached the server (the slow card holds it there);
    # pressed sooner, Chromium may cancel the first before it leaves.
    [first] = shop.wait_for_requests(key, 1)
    assert first["status"] is None  # the first is still being paid
    page.mouse.click(x, y)  # no JavaScript, so no button guard: a second real submit
    expect(page.get_by_test_id("replay-notice")).to_be_visible(timeout=15_000)

    requests = shop.wait_for_requests(key, 2)
    # Both submits reached the server: one placed the order, the other was answered with it as a replay.
    assert [(r["status"], r["replayed"]) for r in requests] == [(303, False), (303, True)]
    [order] = shop.orders_under(key)
    assert len(shop.succeeded_charges_of(order["id"])) == 1
    expect(page.get_by_test_id("order-id")).to_have_text(order["id"])
    context.close()


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


def test_a_lost_answer_then_reload_and_pay_again_shows_the_replay_and_one_order(page: Page, shop_url: str) -> None:
    add_to_cart(page, shop_url)
    fill_checkout(page, shop_url, GOOD_CARD)
    saved_cookies = page.context.cookies()

    def lose_the_answer(route: Route) -> None:
        if route.request.method != "POST":
            route.continue_()
            return
        route.fetch()  # the server gets the payment and answers ...
        route.abort()  # ... and the answer is lost on the way back

    page.route("**/checkout", lose_the_answer)
    with page.expect_event("requestfailed"):
        page.get_by_test_id("pay-button").click()
    page.unroute("**/checkout")
    page.context.clear_cookies()
    page.context.add_cookies(saved_cookies)  # the lost answer's cookie never arrived either

    page.goto(f"{shop_url}/checkout")
    expect(page.get_by_test_id("already-paid")).to_be_visible()  # the payment happened; the shopper never heard
    page.get_by_label("Card number").fill(GOOD_CARD)
    page.get_by_label("Email").fill("shopper@example.com")
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("replay-notice")).to_be_visible()
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    order_id = page.get_by_test_id("order-id").inner_text()
    assert listed_orders(page, shop_url) == [order_id]


def test_the_back_button_after_paying_then_pay_again_shows_the_replay(page: Page, shop_url: str) -> None:
    add_to_cart(page, shop_url)
    fill_checkout(page, shop_url, GOOD_CARD)
    fields = capture_form(page)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    order_id = page.get_by_test_id("order-id").inner_text()
    page.go_back()
    resubmit(page, shop_url, fields)  # the old form, sent again
    expect(page.get_by_test_id("replay-notice")).to_be_visible()
    expect(page.get_by_test_id("order-id")).to_have_text(order_id)
    assert listed_orders(page, shop_url) == [order_id]


def test_a_form_whose_cart_changed_gets_the_out_of_date_page(page: Page, shop_url: str) -> None:
    add_to_cart(page, shop_url)
    fill_checkout(page, shop_url, GOOD_CARD)
    other_tab = page.context.new_page()
    add_to_cart(other_tab, shop_url, index=1)
    other_tab.close()
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_role("heading", name="This checkout page is out of date")).to_be_visible()
    assert listed_orders(page, shop_url) == []  # nothing was ordered, so nothing was charged


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
