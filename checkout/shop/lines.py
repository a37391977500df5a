"""A line of what is being bought, priced: the one shape the cart, the API and the order share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    sku: str
    name: str
    quantity: int
    unit_price_cents: int

    @property
    def total_cents(self) -> int:
        return self.quantity * self.unit_price_cents


def total_of(lines: Iterable[Line]) -> int:
    return sum(line.total_cents for line in lines)
