"""`make reset-lab` refuses to delete the database under a running shop (scripts/reset_lab.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "reset_lab.py"
HOLD_OPEN = "import sys; f = open(sys.argv[1], 'rb'); print('open', flush=True); sys.stdin.read()"


@contextmanager
def held_open(database: Path) -> Iterator[int]:
    """Another process with the database open (a running shop, as far as the script can tell): its pid."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_OPEN, str(database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        yield holder.pid
    finally:
        holder.communicate("")  # end the holder: stdin closes


def _reset(database: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(database)], capture_output=True, text=True, check=False)


@pytest.mark.server
def test_reset_lab_refuses_while_a_running_process_has_the_database_open(tmp_path: Path) -> None:
    database = tmp_path / "checkout.sqlite3"
    database.write_bytes(b"the workshop's data")
    with held_open(database) as pid:
        refused = _reset(database)
        assert refused.returncode == 1
        assert f"pid {pid}" in refused.stdout
        assert database.read_bytes() == b"the workshop's data"
    assert _reset(database).returncode == 0
    assert not database.exists()


def test_reset_lab_empties_the_mailbox_beside_the_database(tmp_path: Path) -> None:
    """The next group's exercise 9 must see its own duplicate, not the last group's 1,837 messages."""
    database, delivered = tmp_path / "checkout.sqlite3", tmp_path / "mail" / "new" / "1.eml"
    database.write_bytes(b"the workshop's data")
    delivered.parent.mkdir(parents=True)
    delivered.write_text("Message-ID: <outbox.order_confirmation.ord_1@checkout.invalid>")
    assert _reset(database).returncode == 0
    assert not database.exists() and not (tmp_path / "mail").exists()


@pytest.mark.server
def test_reset_lab_finds_the_holder_with_lsof_where_there_is_no_proc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """macOS has no /proc: lsof names the running shop instead."""
    if shutil.which("lsof") is None:
        pytest.skip("needs lsof (Debian or Ubuntu: apt-get install lsof; macOS has it)")
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    import reset_lab

    database = tmp_path / "checkout.sqlite3"
    database.write_bytes(b"the workshop's data")
    with held_open(database) as pid:
        assert pid in reset_lab._holders_by_lsof({str(database.resolve())})
