"""What a shopper does in the browser, as small steps the tests compose."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from playwright.sync_api import Page, expect

from tests.helpers import wait_for


def add_to_cart(page: Page, base_url: str, index: int = 0, lang: str = "en") -> None:
    """In English by the button's name, as the spec names it; in another language (``?lang=``, which
    the shop remembers) by data-testid, as a test of a translated page must."""
    if lang == "en":
        page.goto(f"{base_url}/")
        page.get_by_role("button", name="Add to cart").nth(index).click()
        expect(page.get_by_role("status").first).to_contain_text("Added")
    else:
        page.goto(f"{base_url}/?lang={lang}")
        expect(page.locator("html")).to_have_attribute("lang", lang)
        page.get_by_test_id("add-to-cart").nth(index).click()
        expect(page.locator(".flash-success")).to_be_visible()  # added (not an error flash)


def fill_checkout(page: Page, base_url: str, card: str, email: str = "shopper@example.com", lang: str = "en") -> None:
    page.goto(f"{base_url}/checkout")
    if lang == "en":
        page.get_by_label("Email").fill(email)
        page.get_by_label("Card number").fill(card)
    else:
        expect(page.locator("html")).to_have_attribute("lang", lang)
        page.locator("input[name=email]").fill(email)
        page.locator("input[name=card_number]").fill(card)


def pay(page: Page, base_url: str, card: str) -> None:
    """Put the first product in the cart, fill the checkout with ``card``, and press Pay."""
    add_to_cart(page, base_url)
    fill_checkout(page, base_url, card)
    page.get_by_test_id("pay-button").click()


def capture_form(page: Page) -> dict[str, str]:
    """The checkout form's fields as the browser would send them."""
    return page.evaluate("() => Object.fromEntries(new FormData(document.getElementById('checkout-form')))")


def resubmit(page: Page, base_url: str, fields: dict[str, str]) -> None:
    """Submit a form with exactly these fields from the current page: a resubmitted old form."""
    page.evaluate(
        """([action, fields]) => {
            const form = document.createElement('form');
            form.method = 'post';
            form.action = action;
            for (const [name, value] of Object.entries(fields)) {
                const input = document.createElement('input');
                input.type = 'hidden'; input.name = name; input.value = value;
                form.appendChild(input);
            }
            document.body.appendChild(form);
            form.submit();
        }""",
        [f"{base_url}/checkout", fields],
    )


def centre_of(page: Page, test_id: str) -> tuple[float, float]:
    """Where to press an element by position: ``page.mouse.click`` there is a real second press,
    where a locator action would wait for the navigation the first press started."""
    box = page.get_by_test_id(test_id).bounding_box()
    assert box is not None, f"{test_id} is not on the page"
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def listed_orders(page: Page, base_url: str) -> list[str]:
    """The order ids on "Your orders": every order this browser's customer has, as the shop shows them."""
    page.goto(f"{base_url}/orders")
    expect(page.get_by_role("heading", name="Your orders")).to_be_visible()
    return page.locator("table.lines tbody code").all_inner_texts()


def pay_and_lose_the_answer(page: Page, base_url: str, card: str) -> str:
    """Pay for one item with ``card``, whose gateway answer is lost on the first try; the key it was paid under.
    The page then says the payment could not be confirmed yet."""
    add_to_cart(page, base_url)
    fill_checkout(page, base_url, card)
    key = page.get_by_test_id("idempotency-key").inner_text()
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("error-message")).to_contain_text("could not confirm your payment yet")
    return key


class ShopUnderTest:
    """What a test learns from the shop it drives, through the lab's JSON alone: it works the same against the shop
    the tests start and against any running lab shop (``--base-url``). ``GET /api/lab/requests?key=K`` lists the
    requests received under a key; ``GET /api/lab/ledger`` the orders and the gateway's charges."""

    def __init__(self, page: Page, base_url: str) -> None:
        self.page = page
        self.url = base_url

    def requests_under(self, key: str) -> list[dict[str, Any]]:
        answer = self.page.request.get(f"{self.url}/api/lab/requests?{urlencode({'key': key})}")
        assert answer.ok, answer.status
        found: list[dict[str, Any]] = answer.json()
        return found

    def wait_for_requests(self, key: str, count: int) -> list[dict[str, Any]]:
        """Until the shop has received ``count`` requests under ``key`` (an event in its audit trail, not a sleep)."""

        def enough() -> list[dict[str, Any]] | None:
            got = self.requests_under(key)
            return got if len(got) >= count else None

        found: list[dict[str, Any]] = wait_for(enough)
        return found

    def orders_under(self, key: str) -> list[dict[str, Any]]:
        ledger = self.page.request.get(f"{self.url}/api/lab/ledger").json()
        return [order for order in ledger["orders"] if order["idempotency_key"] == key]

    def succeeded_charges_of(self, order_id: str) -> list[dict[str, Any]]:
        ledger = self.page.request.get(f"{self.url}/api/lab/ledger").json()
        return [c for c in ledger["charges"] if c["order_id"] == order_id and c["status"] == "succeeded"]
