"""key-after-operation: the key is written after the order and the charge.

The shop's payment with one part swapped; its page's words: content/<language>/mistakes/key-after-operation.md
"""

from __future__ import annotations

import json
from datetime import timedelta

from checkout.database import insert_ignoring_conflicts, utcnow
from checkout.extensions import db
from checkout.idempotency import STARTED, Complete, MoveTo, Scope, Settings
from checkout.idempotency.store import Held, SqlStore
from checkout.idempotency.types import COMPLETED, FINISHED
from checkout.lab.mistakes.twin import LabStore, twin


class KeyAfterOperationStore(LabStore):
    """Writes the key once, with the answer, like a cache."""

    name = "key-after-operation"

    def claim(self, scope: Scope, fingerprint: str, owner: str, settings: Settings) -> Held | None:
        # THE MISTAKE: nothing is written yet. Until the answer is stored, nobody can know this key is being paid.
        return Held(json.dumps([scope.customer, scope.endpoint, scope.key, fingerprint]), owner, STARTED)

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        if isinstance(step, MoveTo):
            return 0  # a recovery point nobody will ever read
        customer, endpoint, key, fingerprint = json.loads(str(held.id))
        now = utcnow()
        # The first to finish writes it; a duplicate that paid alongside finds it written (and paid anyway).
        db.session.execute(
            insert_ignoring_conflicts(self.records, db.session).values(
                customer=customer,
                endpoint=endpoint,
                key=key,
                fingerprint=fingerprint,
                state=COMPLETED,
                recovery_point=FINISHED,
                reference=held.reference,
                duplicates=0,
                response_status=step.response.status,
                response_headers=dict(step.response.headers),
                response_body=step.response.body,
                created_at=now,
                updated_at=now,
                completed_at=now,
                expires_at=now + timedelta(seconds=settings.lifetime_seconds),
            )
        )
        return 0

    def release(self, held: Held) -> bool:
        return True  # there is no record to give back

    def discard(self, held: Held) -> bool:
        return True


PIPELINE = twin("key-after-operation", store=KeyAfterOperationStore())
SWAPPED = "store"
REPLACES = ((SqlStore.claim, KeyAfterOperationStore.claim),)
