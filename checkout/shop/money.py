"""Prices as money, from integer cents (never floats), written the way the page's language writes them."""

from __future__ import annotations

from decimal import Decimal

from babel import Locale
from babel.numbers import format_currency

from checkout.i18n import current_language

# One convention in every language: the language's own digits, separators and place for the sign,
# with the currency's everyday sign ($, ₴), where CLDR would write "USD" in Ukrainian and "$" in Russian.
SIGNS = {"USD": "$", "UAH": "₴", "EUR": "€"}


def format_money(cents: int, currency: str = "USD") -> str:
    """$1,234.50 in English; 1 234,50 $ in Ukrainian and in Russian."""
    language = current_language()
    sign = SIGNS.get(currency)
    if sign is None:
        return format_currency(Decimal(cents) / 100, currency, locale=language)
    pattern = Locale.parse(language).currency_formats["standard"].pattern.replace("¤", f"'{sign}'")
    return format_currency(Decimal(cents) / 100, currency, format=pattern, locale=language)
