"""What every wrong twin starts from: the shop's own pipeline with one part swapped.

A twin is ``SAFE`` (checkout/shop/payment.py) at its own endpoint, its
orders marked for the damage table, its records in the lab's own table, and
without the orders' unique (customer, key): that last layer would catch most
of these mistakes, and each twin is here to show its own.
"""

from __future__ import annotations

import uuid
from typing import Any

from checkout.idempotency.store import SqlStore
from checkout.lab.mistakes.models import LAB_RECORDS
from checkout.lab.tables import LabPipeline, variant
from checkout.shop.payment import SAFE


class LabStore(SqlStore):
    """The shop's store over the lab's own table: what each wrong store swaps one method of."""

    def __init__(self) -> None:
        super().__init__(LAB_RECORDS)


LAB_STORE = LabStore()


def path_of(mistake: str) -> str:
    """The twin's checkout path: what the damage table groups its money by."""
    return f"mistake:{mistake}"


def endpoint_of(mistake: str) -> str:
    return f"POST /api/lab/mistakes/{mistake}/orders"


def a_new_key_per_request(key: str) -> str:
    """Each request an order of its own (the orders' unique key would catch most mistakes, and each twin is
    here to show its own)."""
    return f"{(key or 'unkeyed')[:200]}~{uuid.uuid4().hex}"  # within the column's 255 characters


def twin(name: str, **part: Any) -> LabPipeline:
    """``SAFE`` at the twin's endpoint, with the one part that is its mistake."""
    swapped: dict[str, Any] = {"store": LAB_STORE, "order_key_of": a_new_key_per_request, **part}
    return variant(SAFE, path_of(name), endpoint=endpoint_of(name), **swapped)
