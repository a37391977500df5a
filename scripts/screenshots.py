"""Drive the shop in Chromium and write the pictures of the README and docs/workshop.md into docs/ (`make screenshots`).

It serves the shop itself, on a fresh SQLite database in a temporary folder,
so it never touches yours. It needs a Chromium (`make browser`) and installs
nothing.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright
from werkzeug.serving import make_server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checkout import create_app  # noqa: E402
from checkout.config import settings  # noqa: E402
from checkout.database import writing  # noqa: E402
from checkout.extensions import db  # noqa: E402
from checkout.shop.seed import seed  # noqa: E402

FLAGS = ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
DESKTOP = {"width": 1200, "height": 860}
PHONE = {"width": 390, "height": 844}


def chromium_path() -> str | None:
    for candidate in (os.environ.get("CHROMIUM_PATH"), "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    return None  # Playwright's own browser, where it could be installed


def add_to_cart(page: Page, base: str, index: int = 0) -> None:
    page.goto(f"{base}/")
    page.get_by_role("button", name="Add to cart").nth(index).click()
    expect(page.get_by_role("status").first).to_contain_text("Added")


def press_pay_twice(page: Page) -> None:
    """Two real presses: the second while the first payment is at the server."""
    box = page.get_by_test_id("pay-button").bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    with page.expect_request(lambda request: request.method == "POST"):
        page.mouse.click(x, y)
    page.mouse.click(x, y)


def shoot(base: str, docs: Path, browser: object) -> None:
    page = browser.new_page(viewport=DESKTOP)  # type: ignore[attr-defined]
    page.goto(f"{base}/")
    page.screenshot(path=str(docs / "catalog.png"))
    add_to_cart(page, base)
    add_to_cart(page, base, index=2)
    page.goto(f"{base}/checkout")
    page.get_by_label("Email").fill("ada@example.com")
    page.get_by_label("Card number").fill("4242 4242 4242 4242")
    page.screenshot(path=str(docs / "checkout.png"), full_page=True)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_text("paid")
    # The back button, then Pay again: the checkout knows this cart was paid, and Pay shows the same order.
    page.go_back()
    expect(page.get_by_test_id("already-paid")).to_be_visible()
    page.get_by_label("Card number").fill("4242 4242 4242 4242")
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("replay-notice")).to_be_visible()
    page.screenshot(path=str(docs / "replayed-order.png"))
    # The unsafe path: one purchase, Pay pressed twice.
    add_to_cart(page, base)
    page.goto(f"{base}/lab/unsafe-checkout")
    page.get_by_label("Email").fill("ada@example.com")
    page.get_by_label("Card number").fill("4000 0000 0000 0077")
    page.screenshot(path=str(docs / "unsafe-checkout.png"))
    press_pay_twice(page)
    page.wait_for_url("**/orders/**", timeout=15_000)
    page.goto(f"{base}/lab")
    expect(page.get_by_test_id("damage-path-unsafe")).to_be_visible()
    page.screenshot(path=str(docs / "lab.png"), full_page=True)
    phone = browser.new_page(viewport=PHONE)  # type: ignore[attr-defined]
    add_to_cart(phone, base)
    phone.goto(f"{base}/checkout")
    phone.screenshot(path=str(docs / "checkout-phone.png"))
    phone.close()
    page.close()


def shoot_ukrainian(base: str, docs: Path, browser: object) -> None:
    """The checkout and the lab in Ukrainian (a fresh browser: ?lang=uk, which the shop remembers)."""
    context = browser.new_context(viewport=DESKTOP, locale="uk-UA")  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(f"{base}/?lang=uk")
    for index in (0, 2):
        page.goto(f"{base}/")
        page.get_by_test_id("add-to-cart").nth(index).click()
        expect(page.get_by_role("status").first).to_be_visible()
    page.goto(f"{base}/checkout")
    page.locator("input[name=email]").fill("oksana@example.com")
    page.locator("input[name=card_number]").fill("4242 4242 4242 4242")
    page.screenshot(path=str(docs / "checkout-uk.png"), full_page=True)
    page.get_by_test_id("pay-button").click()
    expect(page.get_by_test_id("order-status")).to_have_attribute("data-status", "paid")
    page.goto(f"{base}/lab")
    # The top of the lab: the latest payment with its timeline, then the controls.
    page.screenshot(path=str(docs / "lab-uk.png"), full_page=True, clip={"x": 0, "y": 0, "width": 1200, "height": 1250})
    context.close()


def main() -> None:
    docs = ROOT / "docs"
    docs.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        app = create_app(
            {"SQLALCHEMY_DATABASE_URI": f"sqlite:///{folder}/shots.sqlite3", "CHECKOUT_SLOW_CARD_SECONDS": 1.5},
            instance_path=folder,
        )
        with app.app_context():
            db.create_all()
            with writing():
                seed(demo_customers=True)
            db.session.remove()
        server = make_server("127.0.0.1", 0, app, threaded=True)
        settings(app).shop_url = f"http://127.0.0.1:{server.server_port}"  # the relay's webhooks go here
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium_path(), args=FLAGS)
                shoot(f"http://127.0.0.1:{server.server_port}", docs, browser)
                shoot_ukrainian(f"http://127.0.0.1:{server.server_port}", docs, browser)
                browser.close()
        finally:
            server.shutdown()
    print("wrote", ", ".join(sorted(p.name for p in docs.glob("*.png"))))


if __name__ == "__main__":
    main()
