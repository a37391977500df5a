"""Every page, at desktop and phone sizes, in a real Chromium: axe-core finds no violation, and
nothing scrolls sideways (wide tables scroll inside their own box)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from tests.browser.shopping import add_to_cart, capture_form, fill_checkout, resubmit
from tests.conftest import LiveServer
from tests.helpers import DECLINED_CARD, GOOD_CARD, SLOW_CARD, UNAVAILABLE_CARD

SIZES = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
AXE = Axe()


def violations(page: Page) -> list[str]:
    """What axe-core finds wrong on the page as it is now, one line per rule and element."""
    results = AXE.run(page)
    found = []
    for violation in results.response["violations"]:
        for node in violation["nodes"]:
            found.append(f"{violation['id']} ({violation['impact']}): {node['target']} {violation['help']}")
    return found


def sideways(page: Page, width: int) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth")) - width


@pytest.fixture(params=list(SIZES))
def sized_page(request: pytest.FixtureRequest, browser: Browser) -> Page:
    context = browser.new_context(viewport=SIZES[request.param])
    page = context.new_page()
    page.size_name = request.param  # type: ignore[attr-defined]
    yield page
    context.close()


def check(page: Page, where: str, problems: list[str]) -> None:
    width = SIZES[page.size_name]["width"]  # type: ignore[attr-defined]
    problems.extend(f"{where}: {v}" for v in violations(page))
    extra = sideways(page, width)
    if extra > 0:
        problems.append(f"{where}: scrolls sideways by {extra}px at {width}px")


def test_every_shop_page_passes_axe_and_fits_the_screen(sized_page: Page, live_server: LiveServer) -> None:
    page, url, problems = sized_page, live_server.url, []
    visit: Callable[[str, str], None] = lambda path, where: (page.goto(url + path), check(page, where, problems))  # noqa: E731

    visit("/", "catalog")
    visit("/cart", "empty cart")
    visit("/orders", "no orders yet")
    add_to_cart(page, url)
    add_to_cart(page, url, index=2)
    visit("/cart", "cart")
    fill_checkout(page, url, "1234", email="not an email")
    check(page, "checkout", problems)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("error-message").first).to_be_visible()
    check(page, "checkout with field errors", problems)
    page.get_by_label("Email").fill("shopper@example.com")
    page.get_by_label("Card number").fill(DECLINED_CARD)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("error-message")).to_contain_text("declined")
    check(page, "checkout after a decline", problems)
    page.get_by_label("Card number").fill(UNAVAILABLE_CARD)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("error-message")).to_contain_text("could not confirm")
    check(page, "checkout after the gateway was down", problems)
    add_to_cart(page, url, index=1)  # the cart moves on: the unfinished payment waits on its order page
    page.goto(url + "/checkout")
    expect(page.get_by_test_id("earlier-payment")).to_be_visible()
    check(page, "checkout with an earlier unfinished payment", problems)
    page.get_by_test_id("earlier-payment").get_by_role("link").click()
    expect(page.get_by_test_id("finish-payment")).to_be_visible()
    check(page, "an order whose payment can be finished", problems)
    fill_checkout(page, url, GOOD_CARD)
    fields = capture_form(page)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    check(page, "a paid order", problems)
    resubmit(page, url, fields)
    expect(page.get_by_test_id("replay-notice")).to_be_visible()
    check(page, "a replayed order", problems)
    visit("/orders", "orders")
    visit("/no-such-page", "404")
    assert problems == [], "\n".join(problems)


def test_every_lab_page_passes_axe_and_fits_the_screen(sized_page: Page, live_server: LiveServer) -> None:
    page, url, problems = sized_page, live_server.url, []
    add_to_cart(page, url)
    fill_checkout(page, url, GOOD_CARD)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    add_to_cart(page, url)
    seats = live_server.app.test_cli_runner().invoke(args=["workshop", "seats", "3"])
    assert seats.exit_code == 0, seats.output
    lab_pages = (
        ("/lab/unsafe-checkout", "unsafe checkout"),
        ("/lab/room", "the room"),
        ("/lab/seat", "no seat"),
        ("/lab", "lab"),
        ("/lab/exercises", "exercises"),
        ("/lab/concepts", "concepts"),
        ("/lab/mailbox", "mailbox"),
        ("/lab/stores/redis", "the Redis store"),
        ("/lab/reconciliation", "reconciliation"),
        ("/lab/methods", "methods"),
        ("/lab/messages", "messages"),
        ("/lab/mistakes", "mistakes"),
        ("/lab/mistakes/check-then-insert", "a mistake"),  # the last: its form is sent next
    )
    for path, where in lab_pages:
        page.goto(url + path)
        check(page, where, problems)
    page.get_by_test_id("send-wrong").click()  # the mistake's form, sent: its answers are shown
    expect(page.get_by_test_id("sent-answer")).to_have_count(1)
    check(page, "a mistake with its answers", problems)
    page.goto(url + "/" + seats.output.splitlines()[0].split()[1].split("/", 3)[3])  # seat-01's join link
    expect(page.get_by_test_id("seat-token")).to_be_visible()
    check(page, "a seat", problems)
    width = SIZES[page.size_name]["width"]  # type: ignore[attr-defined]
    for language in ("uk", "ru"):  # longer words: the same pages must still fit
        for path, where in lab_pages:
            page.goto(f"{url}{path}?lang={language}")
            extra = sideways(page, width)
            if extra > 0:
                problems.append(f"{where} [{language}]: scrolls sideways by {extra}px at {width}px")
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_SLOW_CARD_SECONDS": 4, "CHECKOUT_BROWSER_WAIT_SECONDS": 0.5}])
def test_the_pages_met_when_something_is_in_the_way_pass_axe_and_fit_the_screen(
    sized_page: Page, live_server: LiveServer, app_overrides: dict[str, object]
) -> None:
    """The still-processing page (a second submit while the first is at the gateway) and the out-of-date page."""
    page, url, problems = sized_page, live_server.url, []
    add_to_cart(page, url)
    fill_checkout(page, url, SLOW_CARD)
    fields = capture_form(page)
    page.get_by_test_id("pay-button").click(no_wait_after=True)
    assert live_server.wait_for_posts("/checkout", 1)  # the first payment is at the gateway (4 s)
    second = page.context.new_page()
    second.goto(url + "/cart")
    resubmit(second, url, fields)  # the same form again: it waits 0.5 s, then is told "still processing"
    expect(second.get_by_test_id("processing-notice")).to_be_visible()
    second.wait_for_url("**/checkout/pending/**")  # it looks again every second by itself (HTTP Refresh)
    check_other(held_still(second), page, "still processing", problems)
    expect(page.get_by_test_id("order-status")).to_have_attribute("data-status", "paid", timeout=15_000)

    add_to_cart(page, url)
    fill_checkout(page, url, GOOD_CARD)
    other_tab = page.context.new_page()
    add_to_cart(other_tab, url, index=1)  # the cart changes behind the form
    other_tab.close()
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("error-message")).to_be_visible()
    check(page, "out of date", problems)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_RATE_LIMIT": "3 per minute"}])
def test_the_too_many_requests_page_passes_axe_and_fits_the_screen(
    sized_page: Page, live_server: LiveServer, app_overrides: dict[str, object]
) -> None:
    page, problems = sized_page, []
    statuses = [page.goto(live_server.url + "/") for _ in range(4)]
    assert [s.status if s else 0 for s in statuses][-1] == 429
    check(page, "429", problems)
    assert problems == [], "\n".join(problems)


def held_still(page: Page) -> Page:
    """A tab of ``page``'s context showing what ``page``'s URL answers now, without the HTTP Refresh that makes the
    still-processing page reload every second: a check that outlasts a second on a busy machine would otherwise
    meet a navigation ("execution context was destroyed")."""
    answer = page.context.request.get(page.url, max_redirects=0)
    assert answer.status == 202, answer.status  # still processing: the payment is at the gateway
    body = answer.text()
    copy = page.context.new_page()
    copy.route(page.url, lambda route: route.fulfill(status=202, content_type="text/html; charset=utf-8", body=body))
    copy.goto(page.url)
    return copy


def check_other(page: Page, sized: Page, where: str, problems: list[str]) -> None:
    """``check`` for a second tab of the sized page's context (same viewport)."""
    page.size_name = sized.size_name  # type: ignore[attr-defined]
    check(page, where, problems)


@pytest.mark.parametrize("lang", ["uk", "ru"])
def test_the_cart_the_order_and_the_orders_fit_a_phone_in_every_language_with_a_40_character_email(
    browser: Browser, live_server: LiveServer, lang: str
) -> None:
    """The longest labels (uk, ru) beside a long email: every amount stays in sight, nothing scrolls sideways."""
    email = "a.very.long.shopper.name1234@example.com"
    assert len(email) == 40
    # How far the table's cells reach past the screen: inside a box that scrolls, a cut column does not make the
    # page scroll, but the shopper does not see it either.
    cut = (
        "Math.max(0, ...[...document.querySelectorAll('.lines td')].map(td => td.getBoundingClientRect().right)) - 390"
    )
    context = browser.new_context(viewport=SIZES["phone"])
    page, url, wide = context.new_page(), live_server.url, {}
    try:
        add_to_cart(page, url, lang=lang)
        add_to_cart(page, url, index=2, lang=lang)
        page.goto(f"{url}/cart")
        wide["cart"] = max(sideways(page, 390), int(page.evaluate(cut)))
        fill_checkout(page, url, GOOD_CARD, email=email, lang=lang)
        page.get_by_test_id("pay-button").click()
        page.wait_for_url("**/orders/**")
        wide["order"] = max(sideways(page, 390), int(page.evaluate(cut)))
        page.goto(f"{url}/orders")
        wide["orders"] = max(sideways(page, 390), int(page.evaluate(cut)))
    finally:
        context.close()
    assert wide == {"cart": 0, "order": 0, "orders": 0}  # px past the screen
