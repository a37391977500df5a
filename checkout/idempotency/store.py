"""The record store port: what the engine needs from wherever the records live (sql_store.py keeps them in the app's
database; an app may bring others, Redis say). A store keeps one record per scope, changed only by its lease holder.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Protocol

from .types import STARTED, Complete, MoveTo, RecordView, Scope, Settings


def worker_name() -> str:
    """host:pid of this process, which a lease names (read each time: gunicorn forks its workers after import)."""
    return f"{socket.gethostname()}:{os.getpid()}"


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

    ``joins_transaction``: its claim and steps are written in the unit of work of the phase they end (a store in
    the app's database), or around it (a store outside, such as Redis). The engine picks its seam by it, once.
    """

    name: str
    joins_transaction: bool

    def find(self, scope: Scope) -> RecordView | None:
        """The scope's record, read without claiming anything."""

    def claim(self, scope: Scope, fingerprint: str, owner: str, settings: Settings) -> Held | None:
        """Create the record, held by ``owner``, in one atomic step; None if the scope has one already."""

    def take_over(self, record: RecordView, owner: str, settings: Settings) -> Held | None:
        """Hold an in-progress record whose lease is free (expired or released); None if another won."""

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        """Move the recovery point (renewing the lease) or store the answer, only while ``held`` is ours: how many
        duplicates the record has counted; LeaseLost when it is not ours."""

    def release(self, held: Held) -> bool:
        """Give the lease back with no outcome; False if it was no longer ours."""

    def discard(self, held: Held) -> bool:
        """Delete the record (nothing happened under it); False if it was no longer ours."""

    def count_duplicate(self, record: RecordView) -> None:
        """Count a request that arrived while the record's lease was live."""


class NoStore:
    """No store at all: a pipeline over ``NO_STORE`` reads no key and keeps nothing, so every request runs the
    whole operation again (the mistake a lab shows before the fix)."""

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
