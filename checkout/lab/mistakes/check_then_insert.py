"""check-then-insert: look the key up, then insert it, with no unique constraint.

The shop's payment with one part swapped; its page's words: content/<language>/mistakes/check-then-insert.md
"""

from __future__ import annotations

import time

import sqlalchemy as sa

from checkout.database import Base
from checkout.idempotency import RecordView, Scope
from checkout.idempotency.models import record_columns, record_table
from checkout.idempotency.store import SqlStore
from checkout.lab.mistakes.twin import twin


def unconstrained_table(metadata: sa.MetaData, name: str = "lab_unconstrained_records") -> sa.Table:
    """The records' table, as the engine's own ``record_table`` makes it, but for one line."""
    return sa.Table(
        name,
        metadata,
        *record_columns(),
        # THE MISTAKE: an index to find a key, and no UniqueConstraint("customer", "endpoint", "key") to refuse one.
        sa.Index(f"ix_{name}_scope", "customer", "endpoint", "key"),
    )


class CheckThenInsertStore(SqlStore):
    """The shop's SQL store over a table that refuses nothing: the look before the claim decides alone."""

    name = "check-then-insert"
    WINDOW_SECONDS = 0.5  # the gap between the check and the insert, widened so that a person hits it every time

    def __init__(self) -> None:
        super().__init__(unconstrained_table(Base.metadata))

    def find(self, scope: Scope) -> RecordView | None:
        found = super().find(scope)
        if found is None:
            time.sleep(self.WINDOW_SECONDS)  # "new": and any request that looks meanwhile reads "new" too
        return found


PIPELINE = twin("check-then-insert", store=CheckThenInsertStore())
SWAPPED = "store"
REPLACES = ((record_table, unconstrained_table),)
