"""Exercises 16 (content/en/exercises/16-set-versus-add.md) and 17 (17-consumer-dies.md), done as their text says:
the lab's Methods page sends each request twice; the Messages page shows a real RabbitMQ redelivering to a consumer
that died before its ack, with and without the inbox."""

from __future__ import annotations

import pytest
from playwright.sync_api import Locator, Page, expect

from checkout.lab.messages import WITHOUT_INBOX
from checkout.shop.loyalty import LOYALTY
from tests.browser.shopping import pay
from tests.browser.test_accessibility import check
from tests.conftest import LiveServer
from tests.helpers import GOOD_CARD, Ledger
from tests.rabbitmq import Rabbit

pytestmark = pytest.mark.server  # exercise 17 runs the consumer as a process of its own


def sends(page: Page) -> list[tuple[str, str]]:
    """(status, the cart after it) of the two sends shown."""
    rows = page.get_by_test_id("methods-send")
    expect(rows).to_have_count(2)
    statuses = rows.get_by_test_id("methods-status").all_inner_texts()
    carts = rows.get_by_test_id("methods-cart").all_inner_texts()
    return list(zip((s.strip() for s in statuses), (c.strip() for c in carts), strict=True))


def test_exercise_16_set_against_add_each_sent_twice(page: Page, live_server: LiveServer, ledger: Ledger) -> None:
    # Step 1: the lab's Methods page, alice, MUG-01, quantity 2: PUT twice.
    page.goto(f"{live_server.url}/lab")
    page.get_by_role("link", name="Methods").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Set, remove, add: the same request twice")
    page.get_by_test_id("send-put").click()
    assert sends(page) == [("200", "2 × MUG-01"), ("200", "2 × MUG-01")]
    # Step 2: POST twice, no key: added twice.
    page.get_by_test_id("send-post").click()
    assert sends(page) == [("200", "4 × MUG-01"), ("200", "6 × MUG-01")]
    # Step 3: POST twice under one key: once, then the stored answer.
    page.get_by_test_id("send-post-key").click()
    assert sends(page) == [("200", "8 × MUG-01"), ("200 replayed", "8 × MUG-01")]
    # Step 4: DELETE twice: gone, and gone.
    page.get_by_test_id("send-delete").click()
    assert sends(page) == [("204", "empty"), ("204", "empty")]
    assert ledger.orders() == [] and ledger.charges() == []  # a cart, not a payment


def consumer_row(page: Page, name: str) -> Locator:
    return page.locator(f"[data-testid=consumer][data-consumer='{name}']")


def test_exercise_17_the_consumer_dies_before_its_ack(
    page: Page, live_server: LiveServer, rabbit: Rabbit, ledger: Ledger
) -> None:
    # Step 1: no loyalty consumer runs (the tests start none); pay with 4242.
    pay(page, live_server.url, GOOD_CARD)
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    [order] = ledger.orders()

    # Step 2: the Messages page; the event waits (no events process here), so "Publish the outbox now".
    page.goto(f"{live_server.url}/lab")
    page.get_by_role("link", name="Messages").click()
    expect(page.get_by_test_id("broker-state")).to_have_attribute("data-state", "up")
    page.get_by_test_id("publish-now").click()
    expect(page.get_by_test_id("event-state")).to_contain_text("published")
    queue = page.locator(f"[data-testid=queue][data-queue='{LOYALTY}']")
    expect(queue.get_by_test_id("queue-ready")).to_have_text("1")

    # Step 3: the consumer awards the point, commits, and dies before its ack.
    crashed = rabbit.flask("events", "consume", LOYALTY, "--crash-before-ack")
    assert crashed.returncode == 1 and "dying now, before the ack" in crashed.stderr

    # Step 4: one delivery, one point, and the message back in its queue; then the consumer again.
    page.reload()
    expect(consumer_row(page, LOYALTY).get_by_test_id("consumer-deliveries")).to_have_text("1")
    expect(consumer_row(page, LOYALTY).get_by_test_id("consumer-points")).to_have_text("1")
    expect(queue.get_by_test_id("queue-ready")).to_have_text("1")
    again = rabbit.cli("events", "consume", LOYALTY)
    assert again.returncode == 0, again.stderr

    # Step 5: redelivered, found in the inbox, still one point; then the twin dies and takes it again.
    page.reload()
    deliveries = page.get_by_test_id("delivery")
    expect(deliveries.filter(has_text="redelivered")).to_have_count(1)
    expect(deliveries.filter(has_text="redelivered")).to_contain_text("in the inbox already: nothing done")
    expect(deliveries.filter(has_text="redelivered")).to_contain_text(f"order.paid:{order.public_id}")
    expect(consumer_row(page, LOYALTY).get_by_test_id("consumer-points")).to_have_text("1")
    page.get_by_test_id(f"crash-{WITHOUT_INBOX}").click()
    expect(page.get_by_role("status").first).to_contain_text("died before its ack")
    page.get_by_test_id(f"consume-{WITHOUT_INBOX}").click()
    expect(consumer_row(page, WITHOUT_INBOX).get_by_test_id("consumer-points")).to_have_text("2")
    expect(consumer_row(page, LOYALTY).get_by_test_id("consumer-points")).to_have_text("1")
    expect(consumer_row(page, WITHOUT_INBOX).get_by_test_id("consumer-points")).to_have_class("num bad")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.size_name = "desktop"  # type: ignore[attr-defined]
    problems: list[str] = []
    check(page, "the messages page after exercise 17", problems)
    assert problems == [], "\n".join(problems)
