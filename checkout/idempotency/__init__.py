"""Idempotency for Flask: run an operation at most once per (customer, endpoint, key), and answer every retry.

A Flask extension that knows nothing of the app using it: it needs Flask and Flask-SQLAlchemy, and every import
inside is relative, so the folder can be copied whole. Below are the names for using it; a store of your own
implements store.py's RecordStore. The guide: docs/engine.md.

    edge.py    Idempotency (the extension), Pipeline, respond, idempotent: the HTTP edge
    engine.py  look, claim, wait, take over, advance through the phases; the seam of a store outside the database
    carry.py   the threads that carry an operation answered 202 to its outcome
    store.py   the RecordStore port, and SqlStore: the records in the app's database; models.py, their table
    types.py   scopes, settings, the steps a phase ends with; outcomes.py, what a phase may raise and how it ends
    keys.py    what a key may look like, and the fingerprint stored with it
    units.py   units of work over the app's session (SQLite's BEGIN IMMEDIATE); signals.py, what the engine tells
"""

from .edge import Idempotency, JsonAnswers, Pipeline, idempotent, json_bytes, key_reused, problem, read_key
from .engine import Operation, Phase
from .keys import InvalidKey, fingerprint, parse_key
from .outcomes import Done, InProgress, LeaseLost, Mismatch, Outcome, Refuse, Refused, RetryLater, Unfinished
from .store import NO_STORE, RecordStore
from .types import STARTED, Complete, Event, MoveTo, RecordView, Scope, Settings, Step, StoredResponse
from .units import writing

# fmt: off
__all__ = [
    "NO_STORE", "STARTED", "Complete", "Done", "Event", "Idempotency", "InProgress", "InvalidKey", "JsonAnswers",
    "LeaseLost", "Mismatch", "MoveTo", "Operation", "Outcome", "Phase", "Pipeline", "RecordStore", "RecordView",
    "Refuse", "Refused", "RetryLater", "Scope", "Settings", "Step", "StoredResponse", "Unfinished", "fingerprint",
    "idempotent", "json_bytes", "key_reused", "parse_key", "problem", "read_key", "writing",
]
# fmt: on
