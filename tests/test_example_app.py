"""examples/minimal/app.py, the engine in a reader's own app, served by gunicorn as its docstring says: in place,
and copied with the engine's folder alone into an empty folder where the project cannot be imported."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import own_database
from tests.helpers import race
from tests.http import Reply, post_json, send
from tests.servers import ROOT, free_port

pytestmark = [pytest.mark.slow, pytest.mark.server]

EXAMPLE = ROOT / "examples" / "minimal"
# Taken out of the import machinery in the copy's processes: the editable install that makes `checkout` importable.
HIDE_THE_PROJECT = '''"""The copy runs where the project cannot be imported: the editable install's finder is gone."""
import sys

sys.meta_path[:] = [finder for finder in sys.meta_path if "__editable__" not in getattr(finder, "__module__", "")]
'''


def copy_of_the_example(folder: Path) -> Path:
    """What a reader copies: the engine's folder, and the example with its one import renamed."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "checkout" / "idempotency", folder / "idempotency", ignore=ignore)
    app = (EXAMPLE / "app.py").read_text()
    assert app.count("from checkout.idempotency import") == 1
    (folder / "app.py").write_text(app.replace("from checkout.idempotency import", "from idempotency import"))
    (folder / "sitecustomize.py").write_text(HIDE_THE_PROJECT)
    return folder


class Example:
    """One gunicorn server of the example (2 workers x 4 threads), on its own database."""

    def __init__(self, folder: Path, database_url: str, log: Path, **settings: str) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        self.env = {**os.environ, "EXAMPLE_DATABASE_URL": database_url, "EXAMPLE_SECRET_KEY": "x" * 32, **settings}
        if (folder / "sitecustomize.py").exists():
            self.env["PYTHONPATH"] = str(folder)
        self.folder = folder
        command = [sys.executable, "-m", "gunicorn", "-w", "2", "--threads", "4", "--no-control-socket"]
        with log.open("wb") as errors:
            self.process = subprocess.Popen(
                [*command, "--bind", self.url.removeprefix("http://"), "app:app"],
                cwd=folder,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
        self._wait_until_serving(log)

    def _wait_until_serving(self, log: Path, timeout: float = 30) -> None:
        deadline, pause = time.monotonic() + timeout, threading.Event()
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the example exited: {log.read_text()[-2000:]}")
            try:
                if send("GET", f"{self.url}/payments", timeout=2).status == 200:
                    return
            except OSError:
                pause.wait(0.1)
        raise RuntimeError(f"the example did not start in {timeout}s: {log.read_text()[-2000:]}")

    def pay(self, key: str, amount: int = 500) -> Reply:
        return post_json(f"{self.url}/payments", {"amount": amount}, {"Idempotency-Key": key})

    def payments(self) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = send("GET", f"{self.url}/payments").json()
        return listed

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module", params=["in place", "copied"])
def folder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if request.param == "in place":
        return EXAMPLE
    return copy_of_the_example(tmp_path_factory.mktemp("copy"))


@pytest.fixture
def example_database(tmp_path: Path) -> Iterator[str]:
    """A fresh database for one server: a SQLite file, or a PostgreSQL schema of its own."""
    with own_database(tmp_path / "example.sqlite3", prefix="ex") as url:
        yield url


@pytest.fixture
def serve(folder: Path, example_database: str, tmp_path: Path) -> Iterator[Any]:
    started: list[Example] = []

    def start(**settings: str) -> Example:
        started.append(Example(folder, example_database, tmp_path / "gunicorn.log", **settings))
        return started[-1]

    yield start
    for example in started:
        example.stop()


def test_the_copy_runs_where_the_project_cannot_be_imported(tmp_path: Path) -> None:
    copy = copy_of_the_example(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(copy)}
    hidden = subprocess.run([sys.executable, "-c", "import checkout"], cwd=copy, env=env, capture_output=True)
    assert hidden.returncode != 0 and b"No module named 'checkout'" in hidden.stderr
    found = subprocess.run([sys.executable, "-c", "import idempotency, app"], cwd=copy, env=env, capture_output=True)
    assert found.returncode == 0, found.stderr.decode()


def test_the_example_is_at_most_sixty_lines_and_imports_nothing_of_the_shop() -> None:
    text = (EXAMPLE / "app.py").read_text()
    assert len(text.splitlines()) <= 60
    imported = [line for line in text.splitlines() if line.startswith(("import ", "from "))]
    assert [line for line in imported if "checkout" in line] == [imported[-1]]
    assert imported[-1].startswith("from checkout.idempotency import")


def test_racing_duplicates_leave_one_payment_and_one_charge(serve: Any) -> None:
    example = serve(EXAMPLE_PROVIDER_SECONDS="0.5")
    key = str(uuid.uuid4())
    statuses = [reply.status for reply in race(12, lambda _: example.pay(key))]
    assert 201 in statuses and set(statuses) <= {201, 409}, statuses
    [payment] = example.payments()
    assert (payment["amount"], payment["charges"]) == (500, 1)


def test_a_crash_after_the_charge_then_a_retry_leaves_one_charge(serve: Any) -> None:
    example = serve(EXAMPLE_CRASH_AFTER_CHARGE="1")
    key = str(uuid.uuid4())
    assert example.pay(key).status == 500  # the provider charged, then the worker's attempt raised
    [crashed] = example.payments()
    assert crashed["charges"] == 1
    retried = example.pay(key)
    assert (retried.status, retried.json()) == (201, {"id": crashed["id"], "amount": 500})
    assert example.payments() == [{"id": crashed["id"], "amount": 500, "charges": 1}]


def test_another_body_under_the_same_key_is_refused_and_changes_nothing(serve: Any) -> None:
    example = serve()
    key = str(uuid.uuid4())
    first = example.pay(key, 500)
    assert first.status == 201
    other = example.pay(key, 700)
    assert (other.status, other.json()["type"]) == (422, "idempotency-key-reused")
    again = example.pay(key, 500)
    assert (again.status, again.body, again.headers["Idempotent-Replayed"]) == (201, first.body, "true")
    assert example.payments() == [{"id": first.json()["id"], "amount": 500, "charges": 1}]
