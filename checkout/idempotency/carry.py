"""Carrying on: an operation answered 202 (``Prefer: respond-async``) is taken to its outcome by the process that
answered, as the client's own retries would take it, so a client that polls sees it end without one.

A thread per operation, at most ``IDEMPOTENCY_CARRIERS`` in a process, holding the request's phases (and so what
they need, a card number, in memory only, never stored). It looks again when the record says to, takes the lease
over once it is free (a dead holder's ran out, or a gateway that was down let it go) and runs the phases on. If the
process dies too, the record is abandoned as any other, and whoever finishes those (a retry, reconcile) ends it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from flask import Flask

from .engine import Asked, advance, peek, take_over
from .outcomes import InProgress, Unfinished
from .types import Scope
from .units import session, utcnow


class Carriers:
    """The threads of one app carrying operations on, one per scope; ``stop`` ends them (an app's teardown)."""

    def __init__(self, app: Flask, limit: int) -> None:
        self.app, self.limit = app, limit
        self.stopping = threading.Event()
        self._threads: dict[Scope, threading.Thread] = {}
        self._lock = threading.Lock()

    def start(self, asked: Asked, retry_after: int) -> bool:
        """Carry ``asked``'s operation on in a thread of its own (or one already does); False if too many do."""
        with self._lock:
            if asked.scope not in self._threads:
                if len(self._threads) >= self.limit or self.stopping.is_set():
                    return False
                # A daemon: a worker that stops does not wait for it (its record is abandoned, finished later).
                thread = threading.Thread(target=self._run, args=(asked, retry_after), daemon=True)
                thread.start()
                self._threads[asked.scope] = thread
        return True

    def _run(self, asked: Asked, retry_after: int) -> None:
        try:
            with self.app.app_context():
                carry_on(asked, retry_after, until=time.monotonic() + 2 * asked.settings.lease_seconds,
                         stopped=self.stopping.wait)  # fmt: skip
        except Exception:  # a database away, say: the record stays as it was, for a retry or reconcile
            self.app.logger.exception("carrying %s on failed", asked.scope.endpoint)
        finally:
            with self._lock:
                self._threads.pop(asked.scope, None)

    def stop(self, timeout: float = 30) -> None:
        self.stopping.set()
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(timeout)


def carry_on(asked: Asked, retry_after: int, *, until: float, stopped: Callable[[float], bool]) -> None:
    """Look again after ``retry_after`` seconds, and whenever the record says, until the operation has an outcome
    (or another request completed it), ``until`` passes or ``stopped(seconds)`` says so while it waits."""
    while True:
        session().rollback()  # never wait in a transaction
        if stopped(retry_after) or time.monotonic() > until:
            return
        view = peek(asked.scope, asked.store)
        if view is None or view.completed:
            return  # done, or discarded (a retry starts afresh): nothing left to carry
        if view.lease_live:  # someone holds it: look again when its call should have ended, or its lease runs out
            retry_after = view.retry_after(utcnow(), asked.settings.expected_call_seconds)
            continue
        taken = take_over(asked.store, view, asked.settings)  # never a claim: it only carries what exists
        outcome = advance(taken, asked.phases) if taken is not None else InProgress(retry_after=1)
        if not isinstance(outcome, InProgress | Unfinished):
            return
        retry_after = outcome.retry_after
