"""The QA folder (qa/), run as a QA engineer runs it, against a shop served as it is deployed: gunicorn and its
two relays. In Python from a copy of the folder in an empty directory, with a virtual environment holding only its
requirements.txt; in TypeScript with its one npm dependency.

Each suite runs whole against the shop with its lab on, where every test also counts orders and charges through the
lab's ledger (one order, one charge). Against the shop with its lab off, as production serves it, the one test that
cannot run without the lab runs alone, and skips saying why. (The others run the same pages there, only without
the ledger's counts: run whole a second time, they would cost the suite a minute.)

Against the lab-off shop, both suites' one test runs in one test: pytest-xdist builds a module's shop once in every
worker that runs one of its tests, and a served shop costs seconds of CPU each time. (The whole suites stay a test
each: the mutation check proves each of them catches a Pay button that stays enabled.)"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from flask import Flask

from checkout.config import settings as settings_of
from checkout.extensions import db
from tests.browser.conftest import _system_chromium
from tests.conftest import make_app, own_database
from tests.relays import OUTBOX, WEBHOOKS, relay_forever
from tests.servers import ROOT, gunicorn

pytestmark = [pytest.mark.slow, pytest.mark.server]

QA = ROOT / "qa"
PYTHON_TESTS, TYPESCRIPT_TESTS = 9, 8  # what each suite holds; with the lab off, one of each is skipped
LAB_OFF_SKIP = "counts through the shop's lab"
NEEDS_THE_LAB = "button guard off"  # the one test that counts through the lab, as each suite names it


@contextmanager
def served_shop(folder: Path, *, lab: bool) -> Iterator[str]:
    """The shop as deployed: a migrated, seeded database, gunicorn, and, with the lab on, the outbox relay and the
    webhook relay (with it off, the one test run only asks the shop whether it has a lab, and skips)."""
    instance = folder / "instance"
    with ExitStack() as stack:
        database_url = stack.enter_context(own_database(folder / "qa.sqlite3", prefix="qa"))
        app = make_app(database_url, str(instance), CHECKOUT_LAB=lab)
        settings = {
            "CHECKOUT_INSTANCE_PATH": str(instance),
            "CHECKOUT_LAB": str(lab).lower(),
            "CHECKOUT_SLOW_CARD_SECONDS": "1",
            "CHECKOUT_WEBHOOK_SECRET": settings_of(app).webhook_secret,
            "CHECKOUT_FINGERPRINT_SECRET": settings_of(app).fingerprint_secret,
        }
        [server] = stack.enter_context(gunicorn(database_url, instance, workers=2, settings=settings))
        settings_of(app).shop_url = server.url  # where the webhook relay delivers
        if lab:
            stack.enter_context(relay_forever(app, database_url, OUTBOX))
            stack.enter_context(relay_forever(app, database_url, WEBHOOKS))
        stack.callback(forget, app)
        yield server.url


def forget(app: Flask) -> None:
    """Close the connections the seeding app opened, before the garbage collector finds them in another test."""
    with app.app_context():
        db.session.remove()
        db.engine.dispose()


@pytest.fixture(scope="module")
def shop_with_its_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_shop(tmp_path_factory.mktemp("lab-on"), lab=True) as url:
        yield url


@pytest.fixture
def shop_without_its_lab(tmp_path: Path) -> Iterator[str]:
    folder = tmp_path / "lab-off"
    folder.mkdir()
    with served_shop(folder, lab=False) as url:
        yield url


@pytest.fixture(scope="session")
def chromium() -> str:
    found = _system_chromium()
    if found is None:
        pytest.skip("the QA tests run here on the system's Chromium (CHROMIUM_PATH or /usr/bin/chromium)")
    return found


def results_of(junit: Path) -> tuple[int, int, int, list[str]]:
    """From pytest's JUnit XML: how many tests ran, failed (or errored), were skipped, and why each was skipped."""
    cases = ET.parse(junit).getroot().iter("testcase")
    ran, failed, reasons = 0, 0, []
    for case in cases:
        ran += 1
        failed += case.find("failure") is not None or case.find("error") is not None
        skipped = case.find("skipped")
        if skipped is not None:
            reasons.append(skipped.get("message", ""))
    return ran, failed, len(reasons), reasons


QA_VENV = ROOT / ".qa-venv"  # kept between runs (gitignored): made again when requirements.txt changes


def venv_of(requirements: Path) -> Path:
    """A virtual environment holding only what ``requirements`` lists (nothing of this project's)."""
    stamp = hashlib.sha256(requirements.read_bytes() + sys.version.encode()).hexdigest()
    if (QA_VENV / "stamp").exists() and (QA_VENV / "stamp").read_text() == stamp:
        return QA_VENV
    shutil.rmtree(QA_VENV, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(QA_VENV)], check=True, timeout=120)
    install = subprocess.run(
        [str(QA_VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", "-r", str(requirements)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if install.returncode != 0:
        pytest.skip(f"could not install qa/requirements.txt from the package index: {install.stderr[-500:]}")
    (QA_VENV / "stamp").write_text(stamp)
    return QA_VENV


def run_python(
    folder: Path, python: str, url: str, chromium: str, junit: Path, *only: str
) -> tuple[int, int, int, list[str]]:
    command = [python, "-m", "pytest", "--base-url", url, "-p", "no:cacheprovider", f"--junitxml={junit}", "-q", *only]
    env = {**os.environ, "CHROMIUM_PATH": chromium}
    env.pop("PYTHONPATH", None)
    run = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert junit.exists(), run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-2000:]  # 0: passed; 1: a test failed
    return results_of(junit)


def run_typescript(url: str, chromium: str, *only: str) -> str:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("needs Node.js for the TypeScript QA tests (Debian or Ubuntu: apt-get install nodejs npm)")
    if not (QA / "ts" / "node_modules" / "@playwright" / "test").is_dir():
        pytest.skip("the TypeScript QA tests' dependency is not installed: make test runs npm ci in qa/ts")
    run = subprocess.run(
        [npx, "playwright", "test", *only],
        cwd=QA / "ts",
        env={**os.environ, "BASE_URL": url, "CHROMIUM_PATH": chromium, "CI": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return run.stdout


def test_the_python_qa_tests_copied_into_an_empty_folder_all_pass_against_a_shop_with_its_lab_on(
    shop_with_its_lab: str, chromium: str, tmp_path: Path
) -> None:
    copy = tmp_path / "qa"
    shutil.copytree(QA, copy, ignore=shutil.ignore_patterns("ts", "__pycache__", ".pytest_cache", "test-results"))
    venv = venv_of(copy / "requirements.txt")
    hidden = subprocess.run([str(venv / "bin" / "python"), "-c", "import checkout"], cwd=copy, capture_output=True)
    assert hidden.returncode != 0  # the copy stands alone: the project is nowhere to import
    ran, failed, skipped, reasons = run_python(copy, str(venv / "bin" / "python"), shop_with_its_lab, chromium,
                                               tmp_path / "junit.xml")  # fmt: skip
    assert (ran, failed, skipped) == (PYTHON_TESTS, 0, 0), reasons


def test_the_typescript_qa_tests_all_pass_against_a_shop_with_its_lab_on(shop_with_its_lab: str, chromium: str) -> None:
    output = run_typescript(shop_with_its_lab, chromium)
    assert f"{TYPESCRIPT_TESTS} passed" in output and "skipped" not in output, output[-2000:]


def test_the_qa_test_that_needs_the_lab_skips_saying_why_in_both_suites_against_a_shop_with_its_lab_off(
    shop_without_its_lab: str, chromium: str, tmp_path: Path
) -> None:
    only = ("-k", NEEDS_THE_LAB.replace(" ", "_"))
    ran, failed, skipped, reasons = run_python(QA, sys.executable, shop_without_its_lab, chromium,
                                               tmp_path / "junit.xml", *only)  # fmt: skip
    assert (ran, failed, skipped) == (1, 0, 1)
    assert all(LAB_OFF_SKIP in reason for reason in reasons), reasons
    output = run_typescript(shop_without_its_lab, chromium, "--grep", NEEDS_THE_LAB)
    assert "1 skipped" in output and "passed" not in output and "failed" not in output, output[-2000:]
