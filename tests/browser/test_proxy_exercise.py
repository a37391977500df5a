"""Exercise 14, the proxy resends (content/en/exercises/14-proxy-resends.md), done as its text says: through a real
nginx in front of two gunicorn servers, configured as make proxy configures them (tests/proxies.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask import Flask
from playwright.sync_api import Browser, Page, expect

from tests.browser.shopping import add_to_cart, fill_checkout
from tests.helpers import SLOW_CARD, Ledger, wait_for
from tests.proxies import NEEDS_NGINX, proxied_shop

pytestmark = [pytest.mark.slow, NEEDS_NGINX, pytest.mark.server]

ORDER_URL = re.compile(r"/orders/ord_[0-9a-f]+$")


def timeline_of(lab: Page) -> list[tuple[str, str]]:
    """The lab's timeline of the latest payment: (event, server) for each step."""
    timeline = lab.get_by_test_id("timeline")
    expect(timeline).to_be_visible()  # the lab's page, not nginx's 504
    steps = timeline.locator("li")
    return [
        (steps.nth(i).locator(".status").inner_text(), steps.nth(i).get_by_test_id("timeline-server").inner_text())
        for i in range(steps.count())
    ]


def test_exercise_14_the_proxy_resends(
    app: Flask, browser: Browser, database_url: str, tmp_path: Path, ledger: Ledger
) -> None:
    # Step 1: make proxy's shop: app-1 and app-2 on one database, nginx waiting 1 s for each one's payment.
    with proxied_shop(database_url, tmp_path) as shop:
        shopper = browser.new_context()
        page = shopper.new_page()
        # Step 2: pay with the slow card (3 s).
        add_to_cart(page, shop.url)
        fill_checkout(page, shop.url, SLOW_CARD)
        page.get_by_test_id("pay-button").click()
        # Step 3: nginx's own page, once it has given up on both servers (a second each).
        expect(page.get_by_role("heading", name="504 Gateway Time-out")).to_be_visible(timeout=15_000)
        sent = shop.sent("POST /checkout")
        assert sent.statuses == ("504", "504")
        assert sorted(shop.name_of(upstream) for upstream in sent.upstreams) == ["app-1", "app-2"]
        # Step 4: the lab, once the second copy has had the first's answer replayed to it.
        wait_for(lambda: "replayed" in ledger.events())
        lab = shopper.new_page()
        lab.goto(f"{shop.url}/lab")
        steps = timeline_of(lab)
        received = [server for event, server in steps if event == "received"]
        assert len(received) == 2 and set(received) == {"app-1", "app-2"}, steps  # one attempt on each server
        first, second = received
        assert [event for event, server in steps if server == second] == ["received", "conflict", "replayed"], steps
        assert ("completed", first) in steps, steps
        # Step 5: Back in the payment's tab, then Pay again: the order, placed already and charged once.
        page.bring_to_front()
        page.go_back()
        expect(page.get_by_test_id("already-paid")).to_be_visible()
        card = page.get_by_label("Card number")
        if not card.input_value():
            card.fill(SLOW_CARD)
        page.get_by_test_id("pay-button").click()
        expect(page.get_by_test_id("replay-notice")).to_be_visible()
        [order] = ledger.orders()
        expect(page.get_by_test_id("order-id")).to_have_text(order.public_id)
        assert len(ledger.succeeded_charges()) == 1
        # Step 6: the unsafe checkout behind the same proxy: one press of Pay.
        add_to_cart(page, shop.url)
        lab.goto(f"{shop.url}/lab")
        lab.get_by_test_id("unsafe-link").click()
        lab.get_by_label("Email").fill("shopper@example.com")
        lab.get_by_label("Card number").fill(SLOW_CARD)
        lab.get_by_test_id("pay-button").click()
        expect(lab.get_by_role("heading", name="504 Gateway Time-out")).to_be_visible(timeout=15_000)
        wait_for(lambda: len(ledger.succeeded_charges()) == 3)  # the copy on the other server has charged too
        assert [o.path for o in ledger.orders()].count("unsafe") == 2
        lab.goto(f"{shop.url}/lab")
        unsafe = lab.get_by_test_id("damage-path-unsafe").get_by_test_id("path-charged-more-than-once")
        safe = lab.get_by_test_id("damage-path-safe").get_by_test_id("path-charged-more-than-once")
        expect(unsafe).to_have_text("$14.00")  # the mug, charged twice for one press
        expect(safe).to_have_text("$0.00")
        shopper.close()
