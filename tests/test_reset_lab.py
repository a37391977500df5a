"""`make reset-lab` refuses to delete the database under a running shop (scripts/reset_lab.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "reset_lab.py"
HOLD_OPEN = "import sys; f = open(sys.argv[1], 'rb'); print('open', flush=True); sys.stdin.read()"


def _reset(database: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(database)], capture_output=True, text=True, check=False)


@pytest.mark.server
def test_reset_lab_refuses_while_a_running_process_has_the_database_open(tmp_path: Path) -> None:
    database = tmp_path / "checkout.sqlite3"
    database.write_bytes(b"the workshop's data")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_OPEN, str(database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        refused = _reset(database)
        assert refused.returncode == 1
        assert f"pid {holder.pid}" in refused.stdout
        assert database.read_bytes() == b"the workshop's data"
    finally:
        holder.communicate("")  # end the holder: stdin closes
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
def test_reset_lab_finds_the_holder_with_lsof_where_there_is_no_proc(tmp_path: Path) -> None:
    """macOS has no /proc: lsof names the running shop instead."""
    if shutil.which("lsof") is None:
        pytest.skip("needs lsof (Debian or Ubuntu: apt-get install lsof; macOS has it)")
    sys.path.insert(0, str(SCRIPT.parent))
    import reset_lab

    database = tmp_path / "checkout.sqlite3"
    database.write_bytes(b"the workshop's data")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_OPEN, str(database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        targets = {str(database.resolve())}
        assert holder.pid in reset_lab._holders_by_lsof(targets)
    finally:
        holder.communicate("")
