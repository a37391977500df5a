"""Drive the shop with Playwright and write PNGs into docs/ (`make screenshots`).

Starts its own server on a fresh SQLite database, so it never touches yours.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright
from werkzeug.serving import make_server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checkout import create_app  # noqa: E402
from checkout.extensions import db  # noqa: E402
from checkout.shop.seed import seed  # noqa: E402

FLAGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-gpu",
]


def main() -> None:
    docs = ROOT / "docs"
    docs.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        app = create_app(
            {
                "SQLALCHEMY_DATABASE_URI": f"sqlite:///{folder}/shots.sqlite3",
                "SECRET_KEY": "shots",
                "CHECKOUT_SLOW_CARD_SECONDS": 1.5,
            }
        )
        with app.app_context():
            db.create_all()
            seed(demo_customers=True)
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_port}"
        chromium = os.environ.get("CHROMIUM_PATH") or (
            "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
        )
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS)
            page = browser.new_page(viewport={"width": 1200, "height": 860})
            page.goto(f"{base}/")
            page.screenshot(path=str(docs / "catalog.png"))
            for index in (0, 2):
                page.get_by_role("button", name="Add to cart").nth(index).click()
            page.goto(f"{base}/checkout")
            page.get_by_label("Email").fill("ada@example.com")
            page.get_by_label("Card number").fill("4242 4242 4242 4242")
            page.screenshot(path=str(docs / "checkout.png"), full_page=True)
            fields = page.evaluate("() => Object.fromEntries(new FormData(document.getElementById('checkout-form')))")
            page.get_by_test_id("pay-button").click()
            page.wait_for_url("**/orders/**")
            page.go_back()
            page.evaluate(
                """([action, fields]) => {
                const form = document.createElement('form'); form.method = 'post'; form.action = action;
                for (const [name, value] of Object.entries(fields)) {
                    const input = document.createElement('input'); input.type = 'hidden';
                    input.name = name; input.value = value; form.appendChild(input);
                }
                document.body.appendChild(form); form.submit();
            }""",
                [f"{base}/checkout", fields],
            )
            page.wait_for_url("**replayed=1")
            page.screenshot(path=str(docs / "replayed-order.png"))
            # The unsafe path: one purchase, pressed twice.
            page.goto(f"{base}/")
            page.get_by_role("button", name="Add to cart").first.click()
            page.goto(f"{base}/lab/unsafe-checkout")
            page.get_by_label("Email").fill("ada@example.com")
            page.get_by_label("Card number").fill("4000 0000 0000 0077")
            page.screenshot(path=str(docs / "unsafe-checkout.png"))
            box = page.get_by_test_id("pay-button").bounding_box()
            assert box is not None
            with page.expect_request(lambda request: request.method == "POST"):
                page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.wait_for_timeout(300)  # a screenshot script, not a test: let the first POST land
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.wait_for_url("**/orders/**", timeout=15_000)
            page.wait_for_timeout(2000)
            page.goto(f"{base}/lab")
            page.screenshot(path=str(docs / "lab.png"), full_page=True)
            browser.close()
        server.shutdown()
    print("wrote", ", ".join(sorted(p.name for p in docs.glob("*.png"))))


if __name__ == "__main__":
    main()
