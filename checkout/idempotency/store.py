"""The record store port: what the engine needs from wherever the records live.

The engine (engine.py) is written once over this interface; the SQL store
(sql_store.py) is the shop's, the lab's Redis store and its deliberately wrong
stores are others. Every store keeps one record per scope and lets only the
worker holding a record's lease change it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from checkout.idempotency.types import STARTED, Complete, MoveTo, RecordView, Scope, Settings


@dataclass
class Held:
    """A record this worker holds: what the store checks a write against."""

    id: int | str
    owner: str  # this worker's random token: a write matches only while it is the record's
    recovery_point: str
    reference: str | None = None
    version: str | None = None  # a store that compares whole values (Redis) keeps the last one written


class RecordStore(Protocol):
    """Records of operations, one per scope.

    ``joins_transaction``: the claim and each step are written in the
    transaction of the phase they end (SQL), or only after it has committed
    (a store outside the order's database, such as Redis). The engine takes
    its one branch on this flag.
    """

    name: str
    joins_transaction: bool

    def find(self, scope: Scope) -> RecordView | None:
        """The scope's record, read without claiming anything."""
        ...

    def claim(self, scope: Scope, fingerprint: str, owner: str, settings: Settings) -> Held | None:
        """Create the record, held by ``owner``, in one atomic step; None if the scope has one already."""
        ...

    def take_over(self, record: RecordView, owner: str, settings: Settings) -> Held | None:
        """Hold an in-progress record whose lease is free (expired or released); None if another won."""
        ...

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        """Move the recovery point (renewing the lease) or store the answer, only while ``held`` is ours.

        Returns how many duplicates the record has counted; raises LeaseLost when it is not ours.
        """
        ...

    def release(self, held: Held) -> bool:
        """Give the lease back with no outcome; False if it was no longer ours."""
        ...

    def discard(self, held: Held) -> bool:
        """Delete the record (nothing happened under it); False if it was no longer ours."""
        ...

    def count_duplicate(self, record: RecordView) -> None:
        """Count a request that arrived while the record's lease was live."""
        ...


class NoStore:
    """No store at all: nothing is remembered, so every request runs the whole operation again.

    What ``run(store=None)`` runs over: the pipeline with no idempotency (the lab's unsafe twins).
    """

    name = "none"
    joins_transaction = True

    def find(self, scope: Scope) -> RecordView | None:
        return None

    def claim(self, scope: Scope, fingerprint: str, owner: str, settings: Settings) -> Held | None:
        return Held(0, owner, STARTED)

    def take_over(self, record: RecordView, owner: str, settings: Settings) -> Held | None:
        return None

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        return 0

    def release(self, held: Held) -> bool:
        return True

    def discard(self, held: Held) -> bool:
        return True

    def count_duplicate(self, record: RecordView) -> None:
        return None


NO_STORE = NoStore()
