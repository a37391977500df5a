"""Exercises 7, 8, 10 and 11 (content/en/exercises/), done in Chromium exactly as their texts say."""

from __future__ import annotations

import re

from flask import Flask
from playwright.sync_api import Browser, Page, expect

from checkout.gateway import GatewayRefund
from checkout.mail.outbox import OutboxMessage
from checkout.shop.models import Refund, WebhookReceipt
from tests.browser.shopping import fill_checkout, pay
from tests.conftest import LiveServer
from tests.helpers import ANSWER_LOST_CARD, SLOW_CARD, Ledger, wait_for
from tests.mailing import maildir_message_ids
from tests.relays import RelayProcess

ORDER_URL = re.compile(r"/orders/ord_[0-9a-f]+$")


def test_exercise_7_refund_twice(page: Page, live_server: LiveServer, ledger: Ledger) -> None:
    pay(page, live_server.url, SLOW_CARD)
    expect(page.get_by_test_id("order-status")).to_have_text("paid", timeout=15_000)
    page.get_by_label("Amount to refund ($)").fill("5.00")
    page.get_by_test_id("refund-button").scroll_into_view_if_needed()
    box = page.get_by_test_id("refund-button").bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.click(x, y)
    refunds_path = page.url.replace(live_server.url, "") + "/refunds"
    assert live_server.wait_for_posts(refunds_path, 1)  # the first refund is at the server (slow, like its charge)
    page.mouse.click(x, y)  # ... and the same form again
    live_server.wait_for_answers(refunds_path, 2)
    expect(page.get_by_test_id("refund-replay-notice")).to_be_visible()
    assert [r.amount_cents for r in ledger.rows(Refund)] == [500]
    assert [r.amount_cents for r in ledger.rows(GatewayRefund)] == [500]
    page.goto(f"{live_server.url}/lab")
    expect(page.get_by_test_id("lab-refunds").locator("tbody tr")).to_have_count(1)


def test_exercise_8_a_webhook_delivered_three_times(page: Page, live_server: LiveServer, ledger: Ledger) -> None:
    pay(page, live_server.url, ANSWER_LOST_CARD)
    expect(page.get_by_test_id("error-message")).to_contain_text("could not confirm")
    page.goto(f"{live_server.url}/lab")
    event = page.get_by_test_id("webhook").filter(has_text="charge.succeeded")
    for _ in range(3):
        event.get_by_test_id("redeliver").click()
        expect(page.get_by_role("status").first).to_contain_text("answered 200")
        event = page.get_by_test_id("webhook").filter(has_text="charge.succeeded")
    expect(event.get_by_test_id("webhook-result")).to_have_text("applied")
    expect(event.get_by_test_id("webhook-duplicates")).to_have_text("2")
    [receipt] = ledger.rows(WebhookReceipt)
    assert (receipt.result, receipt.duplicates) == ("applied", 2)
    assert [o.status for o in ledger.orders()] == ["paid"]
    assert [m.kind for m in ledger.rows(OutboxMessage)] == ["order_confirmation"]


def test_exercise_10_two_shoppers_one_last_lamp(browser: Browser, live_server: LiveServer, ledger: Ledger) -> None:
    shoppers = [browser.new_context().new_page() for _ in range(2)]
    for shopper in shoppers:
        shopper.goto(f"{live_server.url}/")
        shopper.get_by_role("button", name=re.compile("Add to cart.*Last-One Lamp")).click()
        fill_checkout(shopper, live_server.url, SLOW_CARD)
    first, second = shoppers
    first.get_by_test_id("pay-button").click(no_wait_after=True)
    assert live_server.wait_for_posts("/checkout", 1)
    second.get_by_test_id("pay-button").click(no_wait_after=True)

    # The exercise promises one of the two gets the lamp: whichever order takes the stock first,
    # usually the first to press, though its POST arriving first does not make its UPDATE first.
    def winner() -> Page | None:
        first.wait_for_timeout(50)  # lets Playwright take in the pages' navigations
        return next((shopper for shopper in shoppers if ORDER_URL.search(shopper.url)), None)

    won = wait_for(winner, timeout=15)
    lost = second if won is first else first
    expect(lost.get_by_test_id("error-message")).to_contain_text("Last-One Lamp sold out", timeout=15_000)
    assert [o.status for o in ledger.orders()] == ["paid"]
    assert len(ledger.succeeded_charges()) == 1
    second.goto(f"{live_server.url}/lab")
    expect(second.get_by_test_id("lab-stock")).not_to_contain_text("NO")
    for shopper in shoppers:
        shopper.context.close()


def test_exercise_11_a_lost_answer_finished_by_the_webhook_alone(
    page: Page, live_server: LiveServer, ledger: Ledger
) -> None:
    pay(page, live_server.url, ANSWER_LOST_CARD)
    expect(page.get_by_test_id("error-message")).to_contain_text("could not confirm")
    page.goto(f"{live_server.url}/lab")  # never press Pay again: leave the page
    page.get_by_test_id("deliver-webhooks").click()
    expect(page.get_by_role("status").first).to_contain_text("charge.succeeded")
    page.goto(f"{live_server.url}/orders")
    expect(page.get_by_role("table")).to_contain_text("paid")
    [order] = ledger.orders()
    assert order.status == "paid" and len(ledger.succeeded_charges()) == 1
    assert live_server.post_count("/checkout") == 1  # the shopper never retried


def test_exercise_11_a_lost_answer_finished_by_the_relay_process_while_the_shopper_waits(
    page: Page, app: Flask, live_server: LiveServer, ledger: Ledger, relays: tuple[RelayProcess, RelayProcess]
) -> None:
    pay(page, live_server.url, ANSWER_LOST_CARD)
    expect(page.get_by_test_id("error-message")).to_contain_text("could not confirm")
    # Step 2 the other way: wait a few seconds. The gateway's relay, its own process as make run starts it,
    # delivers charge.succeeded; the outbox relay then sends the confirmation the webhook wrote.
    wait_for(lambda: [o.status for o in ledger.orders()] == ["paid"])
    page.goto(f"{live_server.url}/orders")
    expect(page.get_by_role("table")).to_contain_text("paid")
    [order] = ledger.orders()
    assert len(ledger.succeeded_charges()) == 1
    assert live_server.post_count("/checkout") == 1  # the shopper never retried
    assert live_server.post_count("/webhooks/gateway") >= 1
    wait_for(lambda: maildir_message_ids(app) == [f"<outbox.order_confirmation.{order.public_id}@checkout.invalid>"])
