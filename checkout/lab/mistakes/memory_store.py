"""memory-store: keys kept in one worker's memory.

The shop's payment with one part swapped; its page's words: content/<language>/mistakes/memory-store.md
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from checkout.database import utcnow
from checkout.idempotency import STARTED, Complete, LeaseLost, MoveTo, RecordView, Scope, Settings
from checkout.idempotency.store import Held, SqlStore, worker_name
from checkout.idempotency.types import COMPLETED, FINISHED, IN_PROGRESS
from checkout.lab.mistakes.twin import twin


class MemoryStore:
    """A correct store in every way but one: its records live in this process."""

    name = "memory"
    joins_transaction = False

    def __init__(self) -> None:
        # THE MISTAKE: one dict per process. Every other worker has its own, and it has never seen this key.
        self._records: dict[Scope, tuple[RecordView, str | None, float]] = {}  # the record, its owner, lease end
        self._lock = threading.Lock()  # atomic: but only among the threads of this one process

    def find(self, scope: Scope) -> RecordView | None:
        with self._lock:
            found = self._records.get(scope)
        if found is None:
            return None
        record, owner, until = found
        live = owner is not None and until > time.monotonic()
        return replace(record, lease_live=live, lease_holder=worker_name() if live else None)

    def claim(self, scope: Scope, fingerprint: str, owner: str, settings: Settings) -> Held | None:
        now = utcnow()
        record = RecordView(owner, scope, fingerprint, IN_PROGRESS, STARTED, True, None, None, None, None, 0, now, now)
        with self._lock:
            if scope in self._records:
                return None
            self._records[scope] = (record, owner, time.monotonic() + settings.lease_seconds)
        return Held(owner, owner, STARTED)

    def _mine(self, held: Held) -> tuple[Scope, RecordView] | None:
        """The record ``held`` names, if ``held`` still holds it (call under the lock)."""
        for scope, (record, holder, _until) in self._records.items():
            if record.id == held.id and holder == held.owner:
                return scope, record
        return None

    def _swap(self, held: Held, owner: str | None, lease: float, **changes: object) -> bool:
        with self._lock:
            mine = self._mine(held)
            if mine is None or mine[1].state != IN_PROGRESS:
                return False
            scope, record = mine
            self._records[scope] = (replace(record, updated_at=utcnow(), **changes), owner, lease)  # type: ignore[arg-type]
            return True

    def take_over(self, record: RecordView, owner: str, settings: Settings) -> Held | None:
        with self._lock:  # a compare-and-set: only the record as it was read, still in progress and free
            found = self._records.get(record.scope)
            if found is None:
                return None
            now, holder, until = found
            unchanged = (now.id, now.state, now.updated_at) == (record.id, IN_PROGRESS, record.updated_at)
            if not unchanged or (holder is not None and until > time.monotonic()):
                return None
            self._records[record.scope] = (now, owner, time.monotonic() + settings.lease_seconds)
        return Held(now.id, owner, now.recovery_point, now.reference)

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        if isinstance(step, MoveTo):
            kept = self._swap(
                held,
                held.owner,
                time.monotonic() + settings.lease_seconds,
                recovery_point=step.recovery_point,
                reference=held.reference,
            )
        else:
            kept = self._swap(
                held,
                None,
                0.0,
                state=COMPLETED,
                recovery_point=FINISHED,
                reference=held.reference,
                response=step.response,
            )
        if not kept:
            raise LeaseLost(f"record {held.id} is no longer ours")
        return 0

    def release(self, held: Held) -> bool:
        return self._swap(held, None, 0.0, reference=held.reference)

    def discard(self, held: Held) -> bool:
        with self._lock:
            mine = self._mine(held)
            if mine is not None:
                del self._records[mine[0]]
            return mine is not None

    def count_duplicate(self, record: RecordView) -> None:
        return None


PIPELINE = twin("memory-store", store=MemoryStore())
SWAPPED = "store"
REPLACES = ((SqlStore.__init__, MemoryStore.__init__), (SqlStore.claim, MemoryStore.claim))
