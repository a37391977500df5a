"""no-stored-result: the key is stored but not the response.

The shop's payment with one part swapped; its page's words: content/<language>/mistakes/no-stored-result.md
"""

from __future__ import annotations

from checkout.idempotency import Complete, MoveTo, Settings, StoredResponse
from checkout.idempotency.store import Held, SqlStore
from checkout.lab.mistakes.twin import LabStore, twin

ALREADY_PROCESSED = StoredResponse(
    200,
    {"Content-Type": "application/json"},
    b'{"detail":"This request was already processed.","status":"already_processed"}\n',
)


class NoStoredResultStore(LabStore):
    """Remembers that a key was used, not what was answered."""

    name = "no-stored-result"

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        if isinstance(step, Complete):
            # THE MISTAKE: the key says "done", and nothing more: there is no answer to give back.
            step = Complete(ALREADY_PROCESSED)
        return super().save_step(held, step, settings)


PIPELINE = twin("no-stored-result", store=NoStoredResultStore())
SWAPPED = "store"
REPLACES = ((SqlStore.save_step, NoStoredResultStore.save_step),)
