"""Double clicks, two tabs, Back, a slow card and a lost answer: each ends on one order, charged once.

A double-submit test proves something only if the submits it talks about really happened. Chromium cancels a
navigation still in flight when the page submits again, so ``dblclick()`` sends one POST or two depending on timing
(one in 12 of 12 runs here): a test built on it passes with the shop's every defence removed. So these tests pay with
the slow card, which holds the first POST at the shop, press again by position once it is there, and count: the
POSTs the browser sent, what the shop's pages say, and (where the shop's lab is on) what the shop received and
charged. See README.md.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from shopping import (
    GOOD_CARD,
    SLOW_CARD,
    Posts,
    Shop,
    add_to_cart,
    capture_form,
    centre_of,
    fill_checkout,
    listed_orders,
    on_the_order,
    resubmit,
)


def charged_once(shop: Shop, key: str, order_id: str) -> None:
    """Where the lab is on: the shop placed one order under the key, and the gateway charged it once."""
    if shop.lab:
        [order] = shop.orders_under(key)
        assert order["id"] == order_id
        assert len(shop.succeeded_charges_of(order_id)) == 1


@pytest.mark.parametrize("lang", ["en", "uk"])
def test_a_double_click_on_pay_sends_one_payment_and_places_one_order(page: Page, shop: Shop, lang: str) -> None:
    add_to_cart(page, shop.url, lang=lang)
    key = fill_checkout(page, shop.url, SLOW_CARD)
    posts = Posts(page)
    x, y = centre_of(page, "pay-button")
    with page.expect_request(lambda request: request.method == "POST"):
        page.mouse.click(x, y)
    if shop.lab:
        shop.wait_for_requests(key, 1)  # the first press is at the shop, held there by the slow card
    page.mouse.click(x, y)  # the second press of the double click, while the first is paying
    order_id = on_the_order(page)
    expect(page.locator("html")).to_have_attribute("lang", lang)  # the shopper's language, all the way
    expect(page.get_by_test_id("order-status")).to_have_attribute("data-status", "paid")
    assert len(posts) == 1  # the Pay button guard: the second press sent nothing
    expect(page.get_by_test_id("replay-notice")).to_have_count(0)  # so the shop saw one payment, not a retry
    assert listed_orders(page, shop.url) == [order_id]
    if shop.lab:
        assert len(shop.requests_under(key)) == 1
    charged_once(shop, key, order_id)


def test_with_the_button_guard_off_both_presses_reach_the_shop_and_it_places_one_order(page: Page, lab: Shop) -> None:
    page.goto(f"{lab.url}/lab?lang=en")
    page.get_by_test_id("guard-off").click()  # the lab's switch, for this browser only
    add_to_cart(page, lab.url)
    key = fill_checkout(page, lab.url, SLOW_CARD)
    x, y = centre_of(page, "pay-button")
    page.mouse.click(x, y)
    lab.wait_for_requests(key, 1)
    page.mouse.click(x, y)  # nothing stops this one in the browser: the shop alone must
    order_id = on_the_order(page)
    expect(page.get_by_test_id("replay-notice")).to_be_visible()
    received = lab.wait_for_requests(key, 2)
    assert [(r["status"], r["replayed"]) for r in received] == [(303, False), (303, True)]
    assert listed_orders(page, lab.url) == [order_id]
    charged_once(lab, key, order_id)


def test_without_javascript_a_second_submit_during_a_slow_payment_ends_on_the_same_order(
    browser: Browser, shop: Shop
) -> None:
    context = browser.new_context(java_script_enabled=False)  # no script, so no button guard at all
    page = context.new_page()
    add_to_cart(page, shop.url)
    key = fill_checkout(page, shop.url, SLOW_CARD)
    posts = Posts(page)
    x, y = centre_of(page, "pay-button")
    with page.expect_request(lambda request: request.method == "POST"):
        page.mouse.click(x, y)
    if shop.lab:
        shop.wait_for_requests(key, 1)
    page.mouse.click(x, y)  # a second real submit while the first is at the slow gateway
    order_id = on_the_order(page)
    assert len(posts) == 2
    expect(page.get_by_test_id("replay-notice")).to_be_visible()  # the second was answered with the first's order
    assert listed_orders(page, shop.url) == [order_id]
    if shop.lab:
        assert [r["replayed"] for r in shop.wait_for_requests(key, 2)] == [False, True]
    charged_once(shop, key, order_id)
    context.close()


def test_two_tabs_that_pay_at_once_end_on_the_one_order(page: Page, shop: Shop) -> None:
    add_to_cart(page, shop.url)
    other = page.context.new_page()
    keys = {fill_checkout(tab, shop.url, GOOD_CARD) for tab in (page, other)}
    assert len(keys) == 1  # one cart, one payment key, whichever tab shows it
    for tab in (page, other):
        tab.get_by_test_id("pay-button").click(no_wait_after=True)
    ended = {on_the_order(tab) for tab in (page, other)}
    assert len(ended) == 1
    [order_id], [key] = ended, keys
    assert listed_orders(page, shop.url) == [order_id]
    charged_once(shop, key, order_id)


def test_back_then_pay_again_shows_the_order_already_placed(page: Page, shop: Shop) -> None:
    add_to_cart(page, shop.url)
    key = fill_checkout(page, shop.url, GOOD_CARD)
    page.get_by_test_id("pay-button").click()
    order_id = on_the_order(page)
    page.go_back()  # the browser asks for the checkout again: the cart is paid, and the page says so
    expect(page.get_by_test_id("already-paid")).to_be_visible()
    page.get_by_test_id("card-number-input").fill(GOOD_CARD)
    page.get_by_test_id("pay-button").click()
    assert on_the_order(page) == order_id
    expect(page.get_by_test_id("replay-notice")).to_be_visible()
    assert listed_orders(page, shop.url) == [order_id]
    charged_once(shop, key, order_id)


def test_the_paid_form_sent_again_shows_the_same_order(page: Page, shop: Shop) -> None:
    add_to_cart(page, shop.url)
    key = fill_checkout(page, shop.url, GOOD_CARD)
    fields = capture_form(page)  # Chromium reloads the page on Back: keep the form as it was sent
    page.get_by_test_id("pay-button").click()
    order_id = on_the_order(page)
    resubmit(page, shop.url, fields)
    assert on_the_order(page) == order_id
    expect(page.get_by_test_id("replay-notice")).to_be_visible()
    assert listed_orders(page, shop.url) == [order_id]
    charged_once(shop, key, order_id)


def test_a_lost_answer_then_the_checkout_shows_the_same_key_and_pay_shows_the_order(page: Page, shop: Shop) -> None:
    add_to_cart(page, shop.url)
    key = fill_checkout(page, shop.url, GOOD_CARD)
    cookies = page.context.cookies()

    def lose_the_answer(route: Route) -> None:
        if route.request.method != "POST":
            route.continue_()
            return
        route.fetch()  # the shop gets the payment and answers ...
        route.abort()  # ... and the answer is lost on the way back

    page.route("**/checkout", lose_the_answer)
    with page.expect_event("requestfailed"):
        page.get_by_test_id("pay-button").click()
    page.unroute("**/checkout")
    page.context.clear_cookies()
    page.context.add_cookies(cookies)  # the lost answer's cookies never arrived either

    page.goto(f"{shop.url}/checkout")  # the shopper never heard: the checkout again
    expect(page.get_by_test_id("already-paid")).to_be_visible()
    assert page.get_by_test_id("idempotency-key-input").input_value() == key  # the same payment, not a new one
    page.get_by_test_id("card-number-input").fill(GOOD_CARD)
    page.get_by_test_id("pay-button").click()
    order_id = on_the_order(page)
    expect(page.get_by_test_id("replay-notice")).to_be_visible()
    assert listed_orders(page, shop.url) == [order_id]
    charged_once(shop, key, order_id)


def test_a_form_whose_cart_changed_meanwhile_is_out_of_date_and_charges_nothing(page: Page, shop: Shop) -> None:
    add_to_cart(page, shop.url)
    fill_checkout(page, shop.url, GOOD_CARD)
    other = page.context.new_page()
    add_to_cart(other, shop.url, index=1)  # the cart changes in another tab
    other.close()
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_role("heading", name="This checkout page is out of date")).to_be_visible()
    assert listed_orders(page, shop.url) == []
