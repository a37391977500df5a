"""key-deleted-after-answer: the record is deleted as soon as the answer is sent.

THE MISTAKE: the key is used as a lock, not as a record. It is held while the
payment runs (a duplicate meanwhile gets 409), then deleted "to keep the table
small". But the retry that matters most comes later: the client whose answer
was lost on the way back retries after its timeout, finds no key, and pays
again.

THE FIX in the safe code: checkout/idempotency/engine.py (_answer_existing)
replays a completed record's answer for CHECKOUT_KEY_LIFETIME_SECONDS (24 h;
checkout/idempotency/engine.py (purge) removes it only after that), and even
then checkout/shop/models.py (Order, unique on customer_id and
idempotency_key) finds the order a late retry already placed.
"""

from __future__ import annotations

from checkout.idempotency import Complete, MoveTo, Settings
from checkout.idempotency.sql_store import SqlStore
from checkout.idempotency.store import Held
from checkout.lab.mistakes.twin import LAB_RECORDS, twin


class KeyDeletedAfterAnswerStore(SqlStore):
    """Holds the key while the payment runs, like a lock."""

    name = "key-deleted-after-answer"

    def __init__(self) -> None:
        super().__init__(LAB_RECORDS)

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        if isinstance(step, Complete):
            # THE MISTAKE: the answer is on its way, so the key goes. Any retry from now on is a new payment.
            self.discard(held)
            return 0
        return super().save_step(held, step, settings)


PIPELINE = twin("key-deleted-after-answer", store=KeyDeletedAfterAnswerStore())
SWAPPED = "store"
REPLACES = ((SqlStore.save_step, KeyDeletedAfterAnswerStore.save_step),)
