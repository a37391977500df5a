"""gunicorn's metrics folders (prometheus-client's multiprocess mode, one checkout-metrics-* folder
per start): a folder left by a master that was killed is removed by the next start, and a running
server's folder never is. Real gunicorn servers, their temporary folder the test's own."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from flask import Flask

from tests.helpers import wait_for
from tests.servers import gunicorn

pytestmark = [pytest.mark.slow, pytest.mark.server]


@pytest.fixture
def temporary(tmp_path: Path) -> Path:
    """The servers' TMPDIR: the folders they make are this test's alone."""
    path = tmp_path / "tmp"
    path.mkdir()
    return path


def folders(temporary: Path) -> set[Path]:
    return set(temporary.glob("checkout-metrics-*"))


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (gunicorn's workers of that master), from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid:
            found.append(int(stat.parent.name))
    return found


def gone(pid: int) -> bool:
    """Dead (a zombie has closed its files, and with them its share of any lock)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_a_start_removes_the_metrics_folder_of_a_killed_master(
    app: Flask, database_url: str, instance: Path, temporary: Path
) -> None:
    settings = {"TMPDIR": str(temporary)}
    with gunicorn(database_url, instance, workers=2, settings=settings) as [killed]:
        left = folders(temporary)
        assert len(left) == 1
        workers = children_of(killed.process.pid)
        for pid in (killed.process.pid, *workers):  # the whole server dies at once, as with kill -9
            os.kill(pid, signal.SIGKILL)
        killed.process.wait()
        wait_for(lambda: all(gone(pid) for pid in workers))
    assert folders(temporary) == left  # on_exit never ran: the folder is left behind
    with gunicorn(database_url, instance, workers=2, settings=settings):
        now = folders(temporary)
        assert len(now) == 1 and not now & left
    assert folders(temporary) == set()  # a graceful stop removes its own


def test_a_start_keeps_the_metrics_folder_of_a_running_server(
    app: Flask, database_url: str, instance: Path, temporary: Path
) -> None:
    settings = {"TMPDIR": str(temporary)}
    with gunicorn(database_url, instance, workers=1, settings=settings):
        running = folders(temporary)
        with gunicorn(database_url, instance, workers=1, settings=settings):
            both = folders(temporary)
            assert running < both and len(both) == 2
        assert folders(temporary) == running
