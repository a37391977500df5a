"""Exercise 9 (content/en/exercises/09-relay-crash.md), done as its text says: the mail relay dies
between sending the confirmation and marking it sent, and the mailbox shows what the receiver got."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from playwright.sync_api import Browser, Page, expect

from checkout.extensions import db
from checkout.mail.outbox import OutboxMessage
from checkout.mail.relay import Outgoing, relay_once
from tests.browser.shopping import pay
from tests.browser.test_accessibility import SIZES, check
from tests.conftest import LiveServer
from tests.helpers import GOOD_CARD, Ledger
from tests.mailing import enqueue_message, let_claims_run_out, run_relay


class Died(Exception):
    """The relay dying between its send and its mark, in this process."""


def die(outgoing: Outgoing) -> None:
    raise Died(outgoing.message_id)


def test_exercise_9_the_mail_relay_dies_between_sending_and_marking(
    page: Page, app: Flask, live_server: LiveServer, database_url: str, ledger: Ledger
) -> None:
    # Step 1: the shop with no outbox relay running (CHECKOUT_OUTBOX_RELAY=off make run starts none; the tests
    # start none without the relays fixture, and a web worker never relays); pay with 4242.
    pay(page, live_server.url, GOOD_CARD)
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    [order] = ledger.orders()
    confirmation = f"<outbox.order_confirmation.{order.public_id}@checkout.invalid>"
    # The payment writes its confirmation into the outbox in its own transaction (checkout.shop.orders, where
    # the shop has it); written again here, it changes nothing: the outbox is unique on (kind, subject).
    enqueue_message(app, order.public_id, recipient=order.email)

    # Step 2: the relay sends the confirmation, then dies before marking it sent.
    crashed = run_relay(app, database_url, "--crash-after-send")
    assert crashed.returncode != 0, crashed.stderr
    assert f"sent {confirmation}" in crashed.stderr

    # Step 3: the mailbox, from the lab's button: one copy; the outbox still says not sent.
    page.goto(f"{live_server.url}/lab")
    page.get_by_test_id("mailbox-link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("The mailbox")
    expect(page.get_by_test_id("mail-group")).to_have_count(1)
    expect(page.get_by_test_id("mail-group")).to_contain_text(confirmation)
    expect(page.get_by_test_id("mail-copies")).to_have_text("1")
    expect(page.get_by_test_id("duplicates-total")).to_have_text("0")
    expect(page.get_by_test_id("outbox-row").get_by_test_id("outbox-state")).to_contain_text("held")

    # Step 4: once the dead relay's claim has run out (time passes for it here), relay again.
    waiting = run_relay(app, database_url)
    assert "held by a relay" in waiting.stdout and re.search(r"for \d+ s more", waiting.stdout)
    let_claims_run_out(app)
    relayed = run_relay(app, database_url)
    assert relayed.returncode == 0, relayed.stderr

    # Step 5: two copies of one Message-ID received, one duplicate; the outbox marks it sent once.
    page.reload()
    expect(page.get_by_test_id("mail-group")).to_have_count(1)
    expect(page.get_by_test_id("mail-copies")).to_have_text("2")
    expect(page.get_by_test_id("duplicates-total")).to_have_text("1")
    row = page.get_by_test_id("outbox-row")
    expect(row.get_by_test_id("outbox-state")).to_contain_text("sent")
    expect(row.get_by_test_id("outbox-attempts")).to_have_text("2")
    [message] = ledger.rows(OutboxMessage)
    assert message.sent_at is not None and message.attempts == 2


def relay_in(app: Flask, **options: Any) -> None:
    with app.app_context():
        try:
            relay_once(**options)
        finally:
            db.session.remove()


@pytest.fixture(params=list(SIZES))
def sized_page(request: pytest.FixtureRequest, browser: Browser) -> Iterator[Page]:
    """A page at desktop and at phone size, as tests/browser/test_accessibility.py checks every page."""
    context = browser.new_context(viewport=SIZES[request.param])
    page = context.new_page()
    page.size_name = request.param  # type: ignore[attr-defined]
    yield page
    context.close()


def test_a_mailbox_with_a_duplicate_passes_axe_and_fits_the_screen(
    sized_page: Page, app: Flask, live_server: LiveServer
) -> None:
    for subject in ("ord_twice", "ord_once"):
        enqueue_message(app, subject, recipient="a-rather-long-address.for-a-phone@example.com")
    with pytest.raises(Died):
        relay_in(app, after_send=die, limit=1)
    let_claims_run_out(app)
    relay_in(app)
    enqueue_message(app, "ord_waiting")  # and one still waiting in the outbox
    sized_page.goto(f"{live_server.url}/lab/mailbox")
    expect(sized_page.get_by_test_id("duplicates-total")).to_have_text("1")
    problems: list[str] = []
    check(sized_page, "mailbox with a duplicate", problems)
    assert problems == []
