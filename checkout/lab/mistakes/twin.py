"""What every wrong twin starts from: the shop's own pipeline with one part swapped.

A twin is ``SAFE`` (checkout/shop/placement.py) at its own endpoint, its
orders marked for the damage table, its records in the lab's own table, and
without the orders' unique (customer, key): that last layer would catch most
of these mistakes, and each twin is here to show its own.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from checkout.idempotency.sql_store import SqlStore
from checkout.lab.mistakes.models import LAB_RECORDS
from checkout.shop.placement import SAFE, PaymentPipeline, a_new_key_per_request


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


def twin(name: str, **part: Any) -> PaymentPipeline:
    """``SAFE`` at the twin's endpoint, with the one part that is its mistake."""
    fields: dict[str, Any] = {"store": LAB_STORE, **part}
    return replace(SAFE, endpoint=endpoint_of(name), path=path_of(name), order_key_of=a_new_key_per_request, **fields)
