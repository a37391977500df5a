"""How an attempt ends: what a phase may raise, and the outcome the engine hands the edge to answer."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from .types import StoredResponse


class RetryLater(Exception):
    """The outcome is not known yet (a provider is down, its answer was lost): nothing is stored, and the lease
    is released at once. ``event`` and ``detail`` name what happened, noted with the release."""

    def __init__(self, reason: str, retry_after: int = 1, *, event: enum.StrEnum | None = None, **detail: Any) -> None:
        super().__init__(reason)
        self.reason, self.retry_after, self.event, self.detail = reason, retry_after, event, detail


class Refuse(Exception):
    """Raised by the first phase: answer this, and store nothing (the claim is rolled back). A later phase may
    raise it only while nothing was made under the key: its record is deleted, and the key is usable again."""

    def __init__(self, response: StoredResponse, reference: str | None = None) -> None:
        super().__init__(response.status)
        self.response, self.reference = response, reference


class LeaseLost(Exception):
    """Another worker took the operation over; this one must stop writing. ``reference``: what it had made."""

    def __init__(self, message: str, reference: str | None = None) -> None:
        super().__init__(message)
        self.reference = reference


@dataclass(frozen=True)
class Done:
    """The final answer. ``replayed``: an earlier request made it; ``duplicates``: how many other requests with the
    key came while it ran."""

    response: StoredResponse
    replayed: bool
    duplicates: int = 0


@dataclass(frozen=True)
class InProgress:
    """Another request owns the key right now. ``reference``: what the operation created, if anything yet."""

    retry_after: int
    reference: str | None = None


@dataclass(frozen=True)
class Mismatch:
    """The key was first used for a different request; its record is untouched."""


@dataclass(frozen=True)
class Unfinished:
    """This attempt could not reach an outcome; the lease is released and a retry resumes."""

    retry_after: int
    reason: str
    reference: str | None = None


@dataclass(frozen=True)
class Refused:
    """The first phase refused the request; nothing at all was stored, so the key stays usable."""

    response: StoredResponse
    reference: str | None = None  # refused as in progress: what is being made meanwhile, and may be polled


Outcome = Done | InProgress | Mismatch | Unfinished | Refused
