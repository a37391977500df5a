"""The race mistakes show their damage on every try, from their own page: a student presses the page's button
and sees money charged more than once each time, not once in a while (issue: a mistake that hides is no lesson)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import LiveServer

TRIES = 3


def more_than_once_cents(page: Page) -> int:
    """The twin's "More than once" money on its page (its first damage row), in cents."""
    cell = page.get_by_test_id("mistake-damage").locator("tbody tr").first.locator("td").nth(3)
    return int(re.sub(r"\D", "", cell.inner_text()))


@pytest.mark.parametrize(
    ("mistake", "card"), [("check-then-insert", None), ("key-after-operation", "4000 0000 0000 0077")]
)
def test_a_race_mistakes_page_shows_its_damage_on_every_try(
    page: Page, live_server: LiveServer, mistake: str, card: str | None
) -> None:
    page.goto(f"{live_server.url}/lab/mistakes/{mistake}")
    before = more_than_once_cents(page)
    for _try in range(TRIES):
        page.get_by_test_id("new-key").click()  # a fresh key: a new purchase, not a replay of the last one
        page.get_by_label("Copies at once").fill("5")
        if card:
            page.get_by_label("Card").select_option(card)
        page.get_by_test_id("send-wrong").click()
        expect(page.get_by_test_id("mistake-damage")).to_be_visible()
        now = more_than_once_cents(page)
        assert now > before, (mistake, _try, before, now)  # this try, too, charged more than once
        before = now
