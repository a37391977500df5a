"""What the double-click tests need to drive any running shop: its address (``--base-url``), a Chromium, and what the
shop tells them. Nothing here imports the shop: copy this folder anywhere and run ``pytest --base-url URL``."""

from __future__ import annotations

import os
from typing import Any

import pytest

from shopping import Shop


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Chromium from CHROMIUM_PATH, else Playwright's own (``python -m playwright install chromium``)."""
    flags = ["--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-gpu"]
    args = {**browser_type_launch_args, "args": [*browser_type_launch_args.get("args", []), *flags]}
    if os.environ.get("CHROMIUM_PATH"):
        args["executable_path"] = os.environ["CHROMIUM_PATH"]
    return args


@pytest.fixture(scope="session")
def shop(base_url: str | None) -> Shop:
    if not base_url:
        pytest.exit("say which shop to test: pytest --base-url http://127.0.0.1:5000", returncode=4)
    return Shop(base_url)


@pytest.fixture
def lab(shop: Shop) -> Shop:
    """The shop, for a test that can only count through its lab."""
    if not shop.lab:
        pytest.skip(f"counts through the shop's lab, which is off at {shop.url} (GET /api/lab/ledger is not JSON)")
    return shop
