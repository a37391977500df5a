"""``--forever``: one job, round after round, in its own process, until SIGTERM or Ctrl-C.

A process, never a thread in a web worker; a stop request lets the round in progress finish.
Design: docs/design.md#checkoutforeverpy-relays-as-processes-of-their-own
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

import click

from checkout.extensions import db


def run_forever(job: Callable[[threading.Event], object], *, interval: float, doing: str, stopping: str) -> None:
    """Call ``job(stop)`` every ``interval`` seconds until a stop request; ``doing`` and ``stopping`` are
    what the first line and the stop line say (``"relaying the outbox"``, ``"after this message"``)."""
    stop = threading.Event()

    def _ask_to_stop(signum: int, _frame: FrameType | None) -> None:
        click.echo(f"{signal.Signals(signum).name}: stopping {stopping}", err=True)
        stop.set()

    previous = {number: signal.signal(number, _ask_to_stop) for number in (signal.SIGINT, signal.SIGTERM)}
    click.echo(f"{doing} every {interval:g} s; Ctrl-C stops")
    last_error = ""
    try:
        while not stop.is_set():
            try:
                job(stop)
                last_error = ""
            except Exception as error:  # the database may be restarting, or not migrated yet
                text = f"{type(error).__name__}: {error}".splitlines()[0]
                if text != last_error:  # once, not every round while it lasts
                    click.echo(f"this round failed ({text}); trying again every {interval:g} s", err=True)
                last_error = text
            finally:
                db.session.remove()
            stop.wait(interval)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    click.echo("stopped")
