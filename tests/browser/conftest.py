"""Playwright on Debian's Chromium where there is one (no browser downloads here)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FLAGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-gpu",
]


def _system_chromium(headless: bool = True) -> str | None:
    """CHROMIUM_PATH, else Debian's Chromium. Headless, Debian's headless shell first (chromium-headless-shell: the
    headless mode Playwright runs its own Chromium in): the same engine at some 40% of the full browser's CPU, and
    the browser tests are most of the suite's."""
    candidates = [os.environ.get("CHROMIUM_PATH"), "/usr/bin/chromium-headless-shell" if headless else None]
    for candidate in (*candidates, "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    return None  # fall back to Playwright's own browser


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    args = {
        **browser_type_launch_args,  # headless unless pytest-playwright's --headed says otherwise
        "args": [*browser_type_launch_args.get("args", []), *CHROMIUM_FLAGS],
    }
    executable = _system_chromium(headless=args.get("headless", True))
    if executable:
        args["executable_path"] = executable
    return args


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)
