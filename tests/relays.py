"""The relays as real processes, as ``make run`` starts them (Procfile): ``flask outbox relay --forever``
and ``flask gateway deliver --forever``, on the test's database and instance folder."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from flask import Flask

from tests.helpers import wait_for
from tests.mailing import relay_environment

OUTBOX = ("outbox", "relay")
WEBHOOKS = ("gateway", "deliver")


@dataclass
class RelayProcess:
    """A ``--forever`` relay, its output kept in files (a pipe nobody reads could fill and block it)."""

    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path
    returncode: int | None = field(default=None)

    def stop(self, signum: signal.Signals = signal.SIGTERM, timeout: float = 30) -> int:
        """Ask it to stop as honcho and Ctrl-C do; its exit status (it is killed if it does not stop in time)."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            self.returncode = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        return self.returncode

    def output(self) -> tuple[str, str]:
        return self.stdout.read_text(), self.stderr.read_text()


@contextmanager
def relay_forever(
    app: Flask, database_url: str, command: tuple[str, str], *, interval: float = 0.1
) -> Iterator[RelayProcess]:
    """Start the relay ``command`` with ``--forever`` (rounds every ``interval`` s), once it runs its loop; stopped
    at the end if still running. Webhooks go to the app's CHECKOUT_SHOP_URL: the live server's, once that
    fixture has started."""
    name = "-".join(command)
    folder = Path(app.instance_path)
    stdout, stderr = folder / f"{name}.out", folder / f"{name}.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "checkout", *command, "--forever", "--interval", str(interval)],
            env=relay_environment(app, database_url),
            cwd=app.instance_path,
            stdout=out,
            stderr=err,
        )
    relay = RelayProcess(process, stdout, stderr)
    try:
        # Running once it says so (its first line): a stop request before that would find Python still
        # importing, with no handler yet, and end it with -15 instead of "stopped".
        wait_for(lambda: process.poll() is not None or "Ctrl-C stops" in stdout.read_text(), timeout=60)
        assert process.poll() is None, relay.output()
        yield relay
    finally:
        if process.poll() is None:
            relay.stop()
