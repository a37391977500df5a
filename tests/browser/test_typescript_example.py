"""The TypeScript example (tests/browser/ts), run by Node against a shop the test starts: what a QA engineer writes
against any running lab shop with Playwright for TypeScript, kept working because the suite runs it.

``make test`` installs its one dependency (npm ci); without Node.js the test is skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.browser.conftest import _system_chromium
from tests.conftest import LiveServer

EXAMPLE = Path(__file__).parent / "ts"


def test_the_typescript_double_click_example_passes_against_a_running_shop(live_server: LiveServer) -> None:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("needs Node.js for the TypeScript example (Debian or Ubuntu: apt-get install nodejs npm)")
    if not (EXAMPLE / "node_modules" / "@playwright" / "test").is_dir():
        pytest.skip("the TypeScript example's dependency is not installed: make test runs npm ci in tests/browser/ts")
    chromium = _system_chromium()
    if chromium is None:
        pytest.skip("the TypeScript example uses the system's Chromium (CHROMIUM_PATH or /usr/bin/chromium)")
    run = subprocess.run(
        [npx, "playwright", "test"],
        cwd=EXAMPLE,
        env={**os.environ, "BASE_URL": live_server.url, "CHROMIUM_PATH": chromium, "CI": "1"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout, run.stdout[-2000:]
