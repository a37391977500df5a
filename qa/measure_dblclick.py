"""How many payments a Playwright dblclick() on Pay really sends: python measure_dblclick.py --base-url URL [--runs N]

With the shop's lab on, it pays N times with the slow card and dblclick(), with the Pay button guard on and then off
(the lab's switch), and prints how many requests reached the shop under each payment's key. If the counts with the
guard off are 1, a test built on dblclick() would pass with the guard removed: it proves nothing about it.
"""

from __future__ import annotations

import argparse
import os

from playwright.sync_api import sync_playwright

from shopping import SLOW_CARD, Shop, add_to_cart, fill_checkout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--runs", type=int, default=12)
    options = parser.parse_args()
    shop = Shop(options.base_url)
    if not shop.lab:
        raise SystemExit(f"the shop's lab is off at {shop.url}: it is what counts the requests")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=os.environ.get("CHROMIUM_PATH") or None)
        for guard in ("on", "off"):
            counts = []
            for _ in range(options.runs):
                context = browser.new_context()
                page = context.new_page()
                if guard == "off":
                    page.goto(f"{shop.url}/lab?lang=en")
                    page.get_by_test_id("guard-off").click()
                add_to_cart(page, shop.url)
                key = fill_checkout(page, shop.url, SLOW_CARD)
                page.get_by_test_id("pay-button").dblclick()
                page.get_by_test_id("order-id").wait_for(timeout=30_000)
                counts.append(len(shop.requests_under(key)))
                context.close()
            print(f"guard {guard}: requests that reached the shop per dblclick(): {counts}")
        browser.close()


if __name__ == "__main__":
    main()
