"""Each workshop exercise (content/en/exercises/), done exactly as its text says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from playwright.sync_api import Browser, Page, expect

from checkout import client
from checkout.audit import IdempotencyEvent, IdempotencyRecord
from checkout.database import utcnow
from checkout.shop.models import Order
from tests.browser.shopping import add_to_cart, fill_checkout, pay, pay_and_lose_the_answer
from tests.conftest import LiveServer
from tests.helpers import ANSWER_LOST_CARD, GOOD_CARD, SLOW_CARD, UNAVAILABLE_CARD, VERY_SLOW_CARD, Ledger, wait_for
from tests.relays import RelayProcess
from tests.servers import gunicorn

ORDER_URL = re.compile(r"/orders/ord_[0-9a-f]+$")


def charged_more_than_once(page: Page, base_url: str) -> list[str]:
    """The lab's damage table, per purchase: what each was charged beyond its price."""
    page.goto(f"{base_url}/lab")
    return page.get_by_test_id("charged-more-than-once").all_inner_texts()


@pytest.mark.parametrize("lang", ["en", "uk"])
def test_exercise_1_double_click_pay(page: Page, live_server: LiveServer, ledger: Ledger, lang: str) -> None:
    # Step 1: the button guard. A double click sends one payment; the button says it is busy.
    add_to_cart(page, live_server.url, lang=lang)
    fill_checkout(page, live_server.url, SLOW_CARD, lang=lang)
    busy = page.get_by_test_id("pay-button").get_attribute("data-busy-label")
    assert busy and (busy == "Processing payment…") == (lang == "en")  # in Ukrainian, Ukrainian words
    # Note what the button looks like once the form is submitted (sessionStorage survives the navigation).
    page.evaluate("""() => {
        const button = document.querySelector('[data-testid=pay-button]');
        document.getElementById('checkout-form').addEventListener('submit', () =>
            sessionStorage.setItem('pay-button', `${button.textContent}|${button.disabled}`));
    }""")
    box = page.get_by_test_id("pay-button").bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.click(x, y)
    assert live_server.wait_for_posts("/checkout", 1)
    page.mouse.click(x, y)  # while the first payment is at the server (the slow card holds it)
    expect(page).to_have_url(ORDER_URL, timeout=15_000)
    assert page.evaluate("sessionStorage.getItem('pay-button')") == f"{busy}|true"
    assert live_server.post_count("/checkout") == 1  # the disabled button sent nothing more

    # Steps 2 and 3: the guard off for this browser; a double click now sends two payments.
    page.goto(f"{live_server.url}/lab")
    page.get_by_test_id("guard-off").click()
    expect(page.get_by_test_id("guard-state")).to_have_attribute("data-state", "off")
    if lang == "en":
        expect(page.get_by_test_id("guard-state")).to_contain_text("off")
    add_to_cart(page, live_server.url, lang=lang)
    fill_checkout(page, live_server.url, SLOW_CARD, lang=lang)
    expect(page.get_by_test_id("guard-off-notice")).to_be_visible()
    box = page.get_by_test_id("pay-button").bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.click(x, y)
    assert live_server.wait_for_posts("/checkout", 2)  # the first payment is at the server
    page.mouse.click(x, y)
    assert live_server.wait_for_posts("/checkout", 3)  # ... and the second reached it too
    live_server.wait_for_answers("/checkout", 3)
    expect(page).to_have_url(ORDER_URL, timeout=15_000)

    # Step 4: the lab. Two payments in, one order and one charge out; the server's layer caught it.
    assert len(ledger.orders()) == 2 and len(ledger.succeeded_charges()) == 2  # one per purchase
    page.goto(f"{live_server.url}/lab")
    expect(page.locator("#focus-heading")).to_be_in_viewport(ratio=1)  # the latest payment leads the page
    steps = page.get_by_test_id("timeline").locator(".status").all_inner_texts()
    assert "conflict" in steps or "replayed" in steps, steps
    assert steps.count("received") == 2, steps
    expect(page.locator("html")).to_have_attribute("lang", lang)
    cells = page.get_by_test_id("charged-more-than-once")
    assert [cells.nth(i).get_attribute("data-cents") for i in range(cells.count())] == ["0", "0"]
    if lang == "en":
        assert charged_more_than_once(page, live_server.url) == ["$0.00", "$0.00"]


def test_exercise_2_the_answer_is_lost(page: Page, live_server: LiveServer, ledger: Ledger) -> None:
    key = pay_and_lose_the_answer(page, live_server.url, ANSWER_LOST_CARD)
    page.get_by_label("Card number").fill(ANSWER_LOST_CARD)  # a card number is never shown back: type it again
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    [charge] = ledger.charges()
    page.goto(f"{live_server.url}/lab?key={key}")
    steps = page.get_by_test_id("timeline").locator(".status").all_inner_texts()
    for step in ("answer_lost", "released", "resumed", "charged"):
        assert step in steps, steps
    assert steps.index("answer_lost") < steps.index("resumed") < steps.index("charged")
    assert [c.id for c in ledger.succeeded_charges()] == [charge.id]


def test_exercise_2_with_the_relays_running_the_webhook_pays_and_the_timeline_says_so(
    page: Page, live_server: LiveServer, ledger: Ledger, relays: tuple[RelayProcess, RelayProcess]
) -> None:
    """As make run serves it: the webhook relay delivers the lost charge before the shopper presses Pay again."""
    key = pay_and_lose_the_answer(page, live_server.url, ANSWER_LOST_CARD)
    wait_for(lambda: [order.status for order in ledger.orders()] == ["paid"])  # the webhook paid it
    page.get_by_label("Card number").fill(ANSWER_LOST_CARD)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    page.goto(f"{live_server.url}/lab?key={key}")
    steps = page.get_by_test_id("timeline").locator("li").all_inner_texts()
    [charged] = [step for step in steps if step.startswith("charged")]
    assert "by=webhook" in charged, steps
    assert len(ledger.succeeded_charges()) == 1


def test_exercise_3_the_gateway_is_down(page: Page, live_server: LiveServer, ledger: Ledger) -> None:
    pay(page, live_server.url, UNAVAILABLE_CARD)
    expect(page.get_by_test_id("error-message")).to_contain_text("try")
    [record] = ledger.records()
    assert (record.state, record.recovery_point, record.locked_by) == ("in_progress", "order_created", None)
    assert ledger.charges() == []
    page.get_by_label("Card number").fill(UNAVAILABLE_CARD)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    assert len(ledger.charges()) == 1


def test_exercise_4_racing_tabs(page: Page, live_server: LiveServer, ledger: Ledger) -> None:
    add_to_cart(page, live_server.url)
    fill_checkout(page, live_server.url, SLOW_CARD)
    second_tab = page.context.new_page()
    fill_checkout(second_tab, live_server.url, SLOW_CARD)
    assert (
        second_tab.get_by_test_id("idempotency-key").inner_text() == page.get_by_test_id("idempotency-key").inner_text()
    )
    page.get_by_test_id("pay-button").click(no_wait_after=True)
    assert live_server.wait_for_posts("/checkout", 1)
    second_tab.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_text("paid", timeout=15_000)
    expect(second_tab.get_by_test_id("replay-notice")).to_be_visible(timeout=15_000)
    expect(page.get_by_test_id("replay-notice")).to_be_visible()  # the first tab too: it was received twice
    [order] = ledger.orders()
    expect(second_tab.get_by_test_id("order-id")).to_have_text(order.public_id)
    assert len(ledger.succeeded_charges()) == 1


def test_exercise_5_a_worker_dies_mid_payment(
    app: Flask, browser: Browser, database_url: str, tmp_path: Path, ledger: Ledger
) -> None:
    # Step 1: several workers. (The lease and the very slow card are shortened so the test is quick.)
    settings = {
        "CHECKOUT_LEASE_SECONDS": "6",
        "CHECKOUT_GATEWAY_TIMEOUT_SECONDS": "4.5",
        "CHECKOUT_SLOW_CARD_SECONDS": "1",
        "CHECKOUT_VERY_SLOW_CARD_SECONDS": "4",
    }
    with gunicorn(database_url, tmp_path, settings=settings) as [server]:
        shop = browser.new_context()
        payment = shop.new_page()
        # Step 2: pay with the very slow card, then open the lab in another tab.
        add_to_cart(payment, server.url)
        fill_checkout(payment, server.url, VERY_SLOW_CARD)
        payment.get_by_test_id("pay-button").click(no_wait_after=True)
        wait_for(lambda: ledger.worker_of("gateway_called"))
        payment.goto(f"{server.url}/")  # leave the payment's tab: the browser must not resend it
        lab = shop.new_page()
        lab.goto(f"{server.url}/lab")
        # Step 3: the lab shows the worker and the command; kill it (after the gateway charged).
        holder = ledger.worker_of("gateway_called")
        expect(lab.get_by_test_id("kill-command")).to_have_text(f"kill -9 {holder}")
        expect(lab.get_by_test_id("kill-worker")).to_be_in_viewport(ratio=1)  # on the first screen, no scrolling
        wait_for(ledger.charges)
        lab.get_by_test_id("kill-worker").click()
        expect(lab.get_by_role("status").first).to_contain_text(f"Killed worker {holder}")
        # Step 4: never retry; once the lease has run out, reconcile from the lab.
        wait_for(lambda: all(r.locked_until is None or r.locked_until < utcnow() for r in ledger.records()))
        lab.get_by_test_id("reconcile-now").click()
        expect(lab.get_by_role("status").first).to_contain_text("paid")
        [order] = ledger.orders()
        assert order.status == "paid"
        assert len(ledger.succeeded_charges()) == 1
        assert charged_more_than_once(lab, server.url) == ["$0.00"]
        shop.close()
    assert ledger.records(IdempotencyRecord.state == "completed")


def test_exercise_6_the_unsafe_path(page: Page, live_server: LiveServer, ledger: Ledger) -> None:
    add_to_cart(page, live_server.url)
    page.goto(f"{live_server.url}/lab")
    page.get_by_test_id("unsafe-link").click()
    expect(page.get_by_test_id("unsafe-banner")).to_be_visible()
    page.get_by_label("Email").fill("shopper@example.com")
    page.get_by_label("Card number").fill(SLOW_CARD)
    box = page.get_by_test_id("pay-button").bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.click(x, y)
    assert live_server.wait_for_posts("/lab/unsafe-checkout", 1)
    page.mouse.click(x, y)  # no button guard on this page
    live_server.wait_for_answers("/lab/unsafe-checkout", 2)
    expect(page).to_have_url(ORDER_URL, timeout=15_000)  # the browser lands on one of the two orders
    orders = ledger.orders()
    assert len(orders) == 2 and all(o.path == "unsafe" for o in orders)
    assert len({o.purchase_ref for o in orders}) == 1 and orders[0].purchase_ref  # two orders for one purchase
    assert len(ledger.succeeded_charges()) == 2
    assert charged_more_than_once(page, live_server.url) == ["$14.00"]


def test_the_exercises_page_shows_every_exercise_in_its_language(page: Page, live_server: LiveServer) -> None:
    from checkout.lab.content import exercises

    for lang in ("en", "ru"):
        page.goto(f"{live_server.url}/lab/exercises?lang={lang}")
        for exercise in exercises(lang):
            section = page.get_by_test_id(f"exercise-{exercise.slug}")
            expect(section.get_by_role("heading", level=2)).to_have_text(exercise.title)
            expect(section.locator("ol > li")).to_have_count(len(exercise.steps))
            expect(section).to_contain_text(exercise.expect)  # plain text: the exercises mark nothing up
        shown = page.locator("[data-testid^='exercise-']").evaluate_all("(all) => all.map((e) => e.dataset.testid)")
        assert sorted(shown) == sorted(f"exercise-{exercise.slug}" for exercise in exercises(lang))  # all, no other


def _mugs(quantity: int, card: str = GOOD_CARD) -> dict[str, Any]:
    return {"items": [{"sku": "MUG-01", "quantity": quantity}], "email": "a@example.com", "card_number": card}


def test_exercise_15_a_key_that_lives_too_short(page: Page, live_server: LiveServer, ledger: Ledger) -> None:
    # Step 1: the retry client pays, and prints its key.
    first = client.place_order(live_server.url, "demo-alice-token", _mugs(1))
    key = first.attempts[-1].key
    assert first.status == 201
    [order] = ledger.orders()
    # Before the purge, another body under this key is refused: the fingerprint tells them apart.
    assert client.place_order(live_server.url, "demo-alice-token", _mugs(3), key=key).status == 422
    # Another payment left unfinished (its gateway down): the purge must keep it, and its steps.
    unfinished = client.place_order(live_server.url, "demo-alice-token", _mugs(1, UNAVAILABLE_CARD), max_attempts=1)
    assert unfinished.status == 503
    unfinished = unfinished.attempts[-1].key
    # Step 2: the lab's purge, as if the key's lifetime had passed.
    page.goto(f"{live_server.url}/lab")
    page.get_by_test_id("purge-keys").click()
    expect(page.get_by_text("Purged 1 completed keys")).to_be_visible()
    assert ledger.records(IdempotencyRecord.key == key) == []
    assert ledger.events(IdempotencyEvent.key == unfinished)  # a key still in progress keeps its record and steps
    # Step 3: the same key, another body, too late for its record: the order it placed tells them apart.
    assert client.place_order(live_server.url, "demo-alice-token", _mugs(3), key=key).status == 422
    # Step 4: the first body again, a late retry: the first order, nothing charged.
    late = client.place_order(live_server.url, "demo-alice-token", _mugs(1), key=key)
    assert late.status == 201 and late.json()["id"] == order.public_id
    [placed] = ledger.orders(Order.idempotency_key == key)  # one order under the key: the first one
    assert [item.quantity for item in placed.items] == [1]
    assert len(ledger.succeeded_charges()) == 1  # (the unfinished payment charged nothing)
    page.goto(f"{live_server.url}/lab?key={key}")
    steps = page.get_by_test_id("timeline").locator(".status").all_inner_texts()
    assert steps == ["received", "claimed", "already_final", "completed"], steps
