"""Each workshop exercise (checkout/lab/exercises.py), done exactly as its text says."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

from flask import Flask
from flask.testing import FlaskCliRunner
from playwright.sync_api import Browser, Page, expect

from checkout.database import utcnow
from checkout.idempotency import IdempotencyRecord
from tests.browser.shopping import add_to_cart, fill_checkout
from tests.conftest import LiveServer
from tests.helpers import ANSWER_LOST_CARD, SLOW_CARD, UNAVAILABLE_CARD, Ledger, wait_for
from tests.servers import gunicorn

ORDER_URL = re.compile(r"/orders/ord_[0-9a-f]+$")


def damage_twice(page: Page, base_url: str) -> list[str]:
    page.goto(f"{base_url}/lab")
    return page.get_by_test_id("charged-twice").all_inner_texts()


def test_exercise_1_double_click_pay(page: Page, live_server: LiveServer, ledger: Ledger) -> None:
    add_to_cart(page, live_server.url)
    fill_checkout(page, live_server.url, SLOW_CARD)
    # Note what the button looks like once the form is submitted (sessionStorage survives the navigation).
    page.evaluate("""() => {
        const button = document.querySelector('[data-testid=pay-button]');
        document.getElementById('checkout-form').addEventListener('submit', () =>
            sessionStorage.setItem('pay-button', `${button.textContent}|${button.disabled}`));
    }""")
    page.get_by_test_id("pay-button").dblclick()
    expect(page).to_have_url(ORDER_URL, timeout=15_000)
    assert page.evaluate("sessionStorage.getItem('pay-button')") == "Processing payment…|true"
    assert live_server.post_count("/checkout") == 1  # the disabled button sent one request
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
    assert damage_twice(page, live_server.url) == ["$0.00"]


def test_exercise_2_the_answer_is_lost(page: Page, live_server: LiveServer, ledger: Ledger) -> None:
    add_to_cart(page, live_server.url)
    fill_checkout(page, live_server.url, ANSWER_LOST_CARD)
    key = page.get_by_test_id("idempotency-key").inner_text()
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("error-message")).to_contain_text("could not confirm your payment yet")
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


def test_exercise_3_the_gateway_is_down(page: Page, live_server: LiveServer, ledger: Ledger) -> None:
    add_to_cart(page, live_server.url)
    fill_checkout(page, live_server.url, UNAVAILABLE_CARD)
    page.get_by_test_id("pay-button").click()
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
    [order] = ledger.orders()
    expect(second_tab.get_by_test_id("order-id")).to_have_text(order.public_id)
    assert len(ledger.succeeded_charges()) == 1


def test_exercise_5_a_worker_dies_mid_payment(
    app: Flask, browser: Browser, database_url: str, tmp_path: Path, ledger: Ledger, runner: FlaskCliRunner
) -> None:
    with gunicorn(
        database_url,
        tmp_path,
        settings={
            "CHECKOUT_LEASE_SECONDS": "5",
            "CHECKOUT_GATEWAY_TIMEOUT_SECONDS": "2.5",
            "CHECKOUT_SLOW_CARD_SECONDS": "2",
        },
    ) as [server]:
        page = browser.new_page()
        add_to_cart(page, server.url)
        fill_checkout(page, server.url, SLOW_CARD)
        page.get_by_test_id("pay-button").click(no_wait_after=True)
        pid = wait_for(lambda: ledger.worker_of("gateway_called"))  # the worker named in the timeline
        # The shopper goes to the lab instead of waiting (else Chromium resends the POST by itself
        # when the connection dies, and that retry would finish the payment: "never retry").
        page.goto(f"{server.url}/lab")
        wait_for(ledger.charges)
        os.kill(pid, signal.SIGKILL)  # kill -9 <pid>
        # Wait out the lease, then reconcile.
        wait_for(lambda: all(r.locked_until is None or r.locked_until < utcnow() for r in ledger.records()))
        output = runner.invoke(args=["idempotency", "reconcile"]).output
        assert "paid" in output
        page.reload()
        [order] = ledger.orders()
        assert order.status == "paid"
        assert len(ledger.succeeded_charges()) == 1
        expect(page.get_by_test_id("charged-twice")).to_have_text(["$0.00"])
        page.close()
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
    assert len(orders) == 2 and all(o.unsafe for o in orders)
    assert len(ledger.succeeded_charges()) == 2
    assert damage_twice(page, live_server.url) == ["$14.00"]


def test_the_exercises_page_and_the_readme_list_every_exercise(page: Page, live_server: LiveServer) -> None:
    from checkout.lab.exercises import EXERCISES

    page.goto(f"{live_server.url}/lab/exercises")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for exercise in EXERCISES:
        expect(page.get_by_test_id(f"exercise-{exercise.slug}")).to_contain_text(exercise.expect)
        assert exercise.title in readme
    assert len(EXERCISES) >= 6
