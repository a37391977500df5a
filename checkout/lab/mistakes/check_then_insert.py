"""check-then-insert: look the key up, then insert it, with no unique constraint.

The shop's payment with one part swapped; its page's words: content/<language>/mistakes/check-then-insert.md
"""

from __future__ import annotations

import time

import sqlalchemy as sa

from checkout.database import Base, table_of
from checkout.idempotency import Scope
from checkout.idempotency.models import IdempotencyRecord, RecordColumns
from checkout.idempotency.sql_store import SqlStore
from checkout.idempotency.types import RecordView
from checkout.lab.mistakes.twin import twin


class UnconstrainedRecord(RecordColumns, Base):
    __tablename__ = "lab_unconstrained_records"
    # THE MISTAKE: an index to find a key, and no UniqueConstraint("customer", "endpoint", "key") to refuse a second.
    __table_args__ = (sa.Index("ix_lab_unconstrained_records_scope", "customer", "endpoint", "key"),)


class CheckThenInsertStore(SqlStore):
    """The shop's SQL store over a table that refuses nothing: the look before the claim decides alone."""

    name = "check-then-insert"
    WINDOW_SECONDS = 0.5  # the gap between the check and the insert, widened so that a person hits it every time

    def __init__(self) -> None:
        super().__init__(table_of(UnconstrainedRecord))

    def find(self, scope: Scope) -> RecordView | None:
        found = super().find(scope)
        if found is None:
            time.sleep(self.WINDOW_SECONDS)  # "new": and any request that looks meanwhile reads "new" too
        return found


PIPELINE = twin("check-then-insert", store=CheckThenInsertStore())
SWAPPED = "store"
REPLACES = ((IdempotencyRecord, UnconstrainedRecord),)
