"""The engine's vocabulary: what a key belongs to, its settings, the stored
answer, the outcomes a view turns into HTTP, and the two signals an operation
can raise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Scope:
    """A key means something only for one customer on one endpoint."""

    customer: str
    endpoint: str
    key: str


@dataclass(frozen=True)
class Settings:
    lease_seconds: float = 30.0
    lifetime_seconds: float = 24 * 3600


@dataclass(frozen=True)
class StoredResponse:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


# --- outcomes a view turns into HTTP -------------------------------------


@dataclass(frozen=True)
class Done:
    """The operation has its final answer; ``replayed`` if an earlier request produced it."""

    response: StoredResponse
    replayed: bool


@dataclass(frozen=True)
class InProgress:
    """Another request owns the key right now."""

    retry_after: int


@dataclass(frozen=True)
class Mismatch:
    """The key was first used for a different request; its record is untouched."""


@dataclass(frozen=True)
class Unfinished:
    """This attempt could not reach an outcome; the lease is released and a retry resumes."""

    retry_after: int
    reason: str


Outcome = Done | InProgress | Mismatch | Unfinished


class RetryLater(Exception):
    """Raised by an operation whose outcome is not known yet (nothing is stored).

    ``event`` and ``detail`` name what happened, for the audit trail; they are
    written in the same transaction that releases the lease.
    """

    def __init__(self, reason: str, retry_after: int = 1, *, event: str | None = None, **detail: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.event = event
        self.detail = detail


class LeaseLost(Exception):
    """Another worker took the operation over; this one must stop writing."""
