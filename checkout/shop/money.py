"""Prices as money, from integer cents (never floats), written the way the page's language writes them."""

from __future__ import annotations

from decimal import Decimal

from babel.numbers import format_currency

from checkout.i18n import current_language


def format_money(cents: int, currency: str = "USD") -> str:
    """$1,234.50 in English, 1 234,50 USD in Ukrainian, 1 234,50 $ in Russian (Babel's rules)."""
    return format_currency(Decimal(cents) / 100, currency, locale=current_language())
