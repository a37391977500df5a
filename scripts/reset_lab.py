"""Empty the development database and the mailbox for a fresh workshop, unless a running shop still has it open.

Deleting a SQLite file under a running server does not stop that server: it
keeps the deleted file open and goes on serving the old data, while the next
``flask db upgrade`` creates a new file nobody serves. So this looks for any
process that has the file (or its WAL) open, and refuses, naming it, until
that process is stopped: on Linux it reads ``/proc/*/fd``; elsewhere (macOS,
the BSDs) it asks ``lsof``. The Maildir beside the database (``mail/``, where
the outbox delivers without SMTP) goes too, so the next group's mailbox starts
empty.

    .venv/bin/python scripts/reset_lab.py instance/checkout.sqlite3
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SUFFIXES = ("", "-wal", "-shm")


def holders(database: Path) -> dict[int, str]:
    """The processes (pid: command line) that have one of the database's files open."""
    targets = {str(Path(f"{database}{suffix}").resolve()) for suffix in SUFFIXES}
    if not Path("/proc/self/fd").is_dir():
        return _holders_by_lsof(targets)
    found: dict[int, str] = {}
    for proc in Path("/proc").glob("[0-9]*"):
        pid = int(proc.name)
        if pid == os.getpid():
            continue
        try:
            links = {os.readlink(fd) for fd in (proc / "fd").iterdir()}
        except OSError:  # gone, or not ours to read
            continue
        if links & targets:
            try:
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                command = "?"
            found[pid] = command
    return found


def _holders_by_lsof(targets: set[str]) -> dict[int, str]:
    """The same, where there is no /proc: ``lsof -F pc`` prints p<pid> and c<command> for each holder."""
    existing = sorted(target for target in targets if Path(target).exists())
    lsof = shutil.which("lsof") or ("/usr/sbin/lsof" if Path("/usr/sbin/lsof").exists() else None)
    if not existing or lsof is None:
        return {}
    listed = subprocess.run([lsof, "-F", "pc", "--", *existing], capture_output=True, text=True, check=False)
    found, pid = {}, None
    for line in listed.stdout.splitlines():
        if line.startswith("p"):
            pid = int(line[1:])
        elif line.startswith("c") and pid is not None and pid != os.getpid():
            found[pid] = line[1:]
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    database = Path(argv[0])
    running = holders(database)
    if running:
        print(f"{database} is open in a running shop; stop it first (Ctrl-C where it runs), then run this again:")
        for pid, command in sorted(running.items()):
            print(f"  pid {pid}: {command[:100]}")
        return 1
    for suffix in SUFFIXES:
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    mailbox = database.parent / "mail"
    shutil.rmtree(mailbox, ignore_errors=True)
    print(f"{database} and {mailbox}/ removed; migrating and seeding a fresh one")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
