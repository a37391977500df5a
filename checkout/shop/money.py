"""Prices as money, from integer cents (never floats)."""

from __future__ import annotations

SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}


def format_money(cents: int, currency: str = "USD") -> str:
    sign = "-" if cents < 0 else ""
    whole, fraction = divmod(abs(cents), 100)
    amount = f"{whole:,}.{fraction:02d}"
    symbol = SYMBOLS.get(currency)
    return f"{sign}{symbol}{amount}" if symbol else f"{sign}{amount} {currency}"
