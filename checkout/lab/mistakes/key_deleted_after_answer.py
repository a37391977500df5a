"""key-deleted-after-answer: the record is deleted as soon as the answer is sent.

The shop's payment with one part swapped; its page's words: content/<language>/mistakes/key-deleted-after-answer.md
"""

from __future__ import annotations

from checkout.idempotency import Complete, LeaseLost, MoveTo, Settings
from checkout.idempotency.store import Held, SqlStore
from checkout.lab.mistakes.twin import LabStore, twin


class KeyDeletedAfterAnswerStore(LabStore):
    """Holds the key while the payment runs, like a lock."""

    name = "key-deleted-after-answer"

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        if isinstance(step, Complete):
            # THE MISTAKE: the answer is on its way, so the key goes. Any retry from now on is a new payment.
            if not self.discard(held):
                raise LeaseLost(f"record {held.id} is no longer ours")
            return 0
        return super().save_step(held, step, settings)


PIPELINE = twin("key-deleted-after-answer", store=KeyDeletedAfterAnswerStore())
SWAPPED = "store"
REPLACES = ((SqlStore.save_step, KeyDeletedAfterAnswerStore.save_step),)
