"""The twins' records: the engine's own columns and constraint, in the lab's own table, so
the shop's ``idempotency_records`` holds only the shop's. (check-then-insert keeps its own
table, without the unique constraint: checkout/lab/mistakes/check_then_insert.py.)"""

from __future__ import annotations

import sqlalchemy as sa

from checkout.database import Base
from checkout.idempotency.models import record_columns

LAB_RECORDS = sa.Table(
    "lab_records", Base.metadata, *record_columns(), sa.UniqueConstraint("customer", "endpoint", "key")
)
