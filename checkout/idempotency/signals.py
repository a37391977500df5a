"""What the engine tells the app, as blinker signals sent the way Flask sends its own (the app is the sender):
subscribe for an audit trail, metrics or logs; the engine works the same with nobody listening."""

from __future__ import annotations

import enum
from typing import Any

from blinker import Namespace
from flask import Flask, current_app

from .types import Scope

_signals = Namespace()

noted = _signals.signal("idempotency-noted")
"""One step of an operation (``scope``, ``name``, ``detail``), sent inside the unit of work it belongs to: a
subscriber that writes it in the same session commits or rolls back with the step."""

purged = _signals.signal("idempotency-purged")
"""Completed records deleted past their lifetime (``scopes``), sent inside the unit of work that deletes them."""


def note(scope: Scope, name: enum.StrEnum | str, **detail: Any) -> None:
    """Tell the subscribers of ``noted`` (a request with no key has no trail: nothing to tell it by)."""
    if scope.key and noted.receivers:
        noted.send(app(), scope=scope, name=str(name), detail=detail)


def app() -> Flask:
    """The app itself (the sender Flask's own signals name), not the proxy to it."""
    found: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    return found


def listening() -> bool:
    """Whether a note would reach anyone: a unit of work for notes alone is opened only then."""
    return bool(noted.receivers)
