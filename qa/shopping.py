"""What a shopper does, and what the shop says back: small steps the double-click tests compose.

Nothing here imports the shop. ``Shop`` reads its public pages and, when its lab is on, the lab's JSON.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
from playwright.sync_api import Page, Request, expect

SLOW_CARD = "4000 0000 0000 0077"  # the gateway takes seconds: a second press lands while the first is paying
GOOD_CARD = "4242 4242 4242 4242"
LOST_ANSWER_CARD = "4000 0000 0000 0259"  # charged, then the gateway's answer to the shop is lost
# A proxy that gave up on the shop answers with its own page (nginx: "504 Gateway Time-out").
PROXY_GAVE_UP = re.compile(r"50[24] (Gateway Time-?out|Bad Gateway)", re.IGNORECASE)
PROXY_REASON = (
    "a proxy in front of the shop answered {status} before the shop did: it gave up waiting (its read timeout is "
    "shorter than this payment), and may have resent the POST to another server. The shop still pays once; a "
    "shopper presses Pay again to see the order. To test the shop itself here, raise the proxy's read timeout above "
    "the slow card's delay (nginx: proxy_read_timeout), or point --base-url at an app server behind it."
)


class Shop:
    """The shop under test, through its public pages and, when its lab is on, the lab's JSON:
    ``/api/lab/requests?key=K`` (every request it received under a key) and ``/api/lab/ledger`` (orders, charges)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        try:
            answer = requests.get(f"{self.url}/api/lab/ledger", timeout=10)
        except requests.ConnectionError as error:
            pytest.exit(f"no shop answers at {self.url}: {error}", returncode=4)
        self.lab = answer.status_code == 200 and answer.headers.get("Content-Type", "").startswith("application/json")

    def requests_under(self, key: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._lab(f"/api/lab/requests?{urlencode({'key': key})}")
        return found

    def wait_for_requests(self, key: str, count: int, timeout: float = 20) -> list[dict[str, Any]]:
        """Until the shop has received ``count`` requests under ``key`` (what it says, never a sleep)."""
        return wait_for(lambda: (found := self.requests_under(key)) and len(found) >= count and found, timeout)

    def orders_under(self, key: str) -> list[dict[str, Any]]:
        return [order for order in self._lab("/api/lab/ledger")["orders"] if order["idempotency_key"] == key]

    def succeeded_charges_of(self, order_id: str) -> list[dict[str, Any]]:
        charges = self._lab("/api/lab/ledger")["charges"]
        return [charge for charge in charges if charge["order_id"] == order_id and charge["status"] == "succeeded"]

    def _lab(self, path: str) -> Any:
        answer = requests.get(f"{self.url}{path}", timeout=10)
        answer.raise_for_status()
        return answer.json()


def wait_for(condition: Callable[[], Any], timeout: float = 20) -> Any:
    deadline, pause = time.monotonic() + timeout, 0.01
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(pause)  # from 10 ms to 100 ms: seen at once when quick, cheap to the shop when slow
        pause = min(pause * 1.5, 0.1)
    raise AssertionError(f"still not so after {timeout} s")


class Posts:
    """The checkout POSTs this page's browser sent (what left it, whatever the shop did with them)."""

    def __init__(self, page: Page) -> None:
        self.sent: list[Request] = []
        page.on("request", lambda request: self._seen(request))

    def _seen(self, request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/checkout"):
            self.sent.append(request)

    def __len__(self) -> int:
        return len(self.sent)


def on_the_order(page: Page, timeout: float = 30_000) -> str:
    """Wait for the order page a payment ends on, and return the order's id. A proxy's own error page instead is
    reported as what it is (the test is skipped, saying why), not as a failure of the shop."""
    order, proxy = page.get_by_test_id("order-id"), page.get_by_role("heading", name=PROXY_GAVE_UP)
    expect(order.or_(proxy)).to_be_visible(timeout=timeout)
    if proxy.is_visible():
        pytest.skip(PROXY_REASON.format(status=proxy.inner_text()))
    return order.inner_text()


# --- what a shopper does ---------------------------------------------------------------------------------------


def add_to_cart(page: Page, url: str, index: int = 0, lang: str = "en") -> None:
    """In English by the button's name; in another language (``?lang=``, which the shop remembers) by test id."""
    page.goto(f"{url}/?lang={lang}")
    before = int(page.get_by_test_id("cart-count").inner_text() or 0)
    if lang == "en":
        page.get_by_role("button", name="Add to cart").nth(index).click()
    else:
        page.get_by_test_id("add-to-cart").nth(index).click()
    expect(page.get_by_test_id("cart-count")).to_have_text(str(before + 1))


def fill_checkout(page: Page, url: str, card: str, email: str = "qa@example.com") -> str:
    """Open the checkout and type an email and a card; the payment key its form will send."""
    page.goto(f"{url}/checkout")
    page.get_by_test_id("email-input").fill(email)
    page.get_by_test_id("card-number-input").fill(card)
    return page.get_by_test_id("idempotency-key-input").input_value()


def centre_of(page: Page, test_id: str) -> tuple[float, float]:
    """Where to press by position: ``page.mouse.click`` there is a real second press, where a locator's click would
    wait for the navigation the first press started."""
    box = page.get_by_test_id(test_id).bounding_box()
    assert box is not None, f"{test_id} is not on the page"
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def capture_form(page: Page) -> dict[str, str]:
    """The checkout form's fields as the browser would send them."""
    return page.evaluate("() => Object.fromEntries(new FormData(document.getElementById('checkout-form')))")


def resubmit(page: Page, url: str, fields: dict[str, str]) -> None:
    """Send exactly these fields to the checkout from the current page: an old form, sent again."""
    page.evaluate(
        """([action, fields]) => {
            const form = Object.assign(document.createElement('form'), {method: 'post', action});
            for (const [name, value] of Object.entries(fields)) {
                form.appendChild(Object.assign(document.createElement('input'), {type: 'hidden', name, value}));
            }
            document.body.appendChild(form);
            form.submit();
        }""",
        [f"{url}/checkout", fields],
    )


def listed_orders(page: Page, url: str) -> list[str]:
    """The order ids on "Your orders": every order this browser's shopper has, as the shop shows them."""
    page.goto(f"{url}/orders?lang=en")
    expect(page.get_by_role("heading", name="Your orders")).to_be_visible()
    return page.locator("table.lines tbody code").all_inner_texts()
