"""Languages: English, Ukrainian and Russian for every page (Flask-Babel); the JSON API stays English.

A page's language: ``?lang=`` (then remembered in the session), the session, ``Accept-Language``, else English.
The API answers in English whatever is asked: its words are part of the contract.
Design: docs/design.md#checkouti18npy-the-languages-of-pages-and-the-api
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from urllib.parse import urlencode

import flask_babel
from babel import Locale
from babel.dates import format_datetime
from babel.numbers import format_currency, format_decimal
from flask import Flask, has_request_context, request, session
from flask_babel import Babel, get_locale

LANGUAGES = {"en": "English", "uk": "Українська", "ru": "Русский"}
DEFAULT = "en"
SESSION_KEY = "lang"
# Answers read by programs, not people: always English.
ENGLISH_ONLY_PREFIXES = ("/api/", "/webhooks/", "/metrics")


def N_(text: str) -> str:  # noqa: N802 (gettext's conventional name for a no-op marker)
    """Marks a string for translation without translating it now (pybabel extracts ``N_``): data such as
    the seeded products, translated where it is shown (``_(product.name)`` in a template)."""
    return text


def _(text: str, **variables: object) -> str:
    """gettext, typed (Flask-Babel ships no type information): the current language's words for ``text``."""
    return str(flask_babel.gettext(text, **variables))


def ngettext(singular: str, plural: str, num: int, **variables: object) -> str:
    """ngettext, typed: the right plural form of the current language (Ukrainian and Russian have three)."""
    return str(flask_babel.ngettext(singular, plural, num, **variables))


def _asked() -> str | None:
    asked = request.args.get("lang", "").strip().lower()
    return asked if asked in LANGUAGES else None


def select_locale() -> str:
    if not has_request_context() or request.path.startswith(ENGLISH_ONLY_PREFIXES):
        return DEFAULT
    chosen = _asked() or session.get(SESSION_KEY)
    if chosen in LANGUAGES:
        return str(chosen)
    return _accepted()


def _accepted() -> str:
    """The best of our languages the request's ``Accept-Language`` asks for, else English."""
    return request.accept_languages.best_match(list(LANGUAGES), default=DEFAULT)


def shopper_language() -> str:
    """The language an order's emails are written in: the page's, or on the API (whose answers stay English)
    the one its ``Accept-Language`` asks for."""
    if has_request_context() and request.path.startswith(ENGLISH_ONLY_PREFIXES):
        return _accepted()
    return current_language()


def current_language() -> str:
    locale = get_locale() if has_request_context() else None
    return locale.language if locale is not None and locale.language in LANGUAGES else DEFAULT


def format_when(moment: datetime) -> str:
    """A moment in the page's language, in UTC (the shop keeps every time in UTC)."""
    return format_datetime(moment.astimezone(UTC), "medium", tzinfo=UTC, locale=current_language()) + " UTC"


def translated(text: str) -> str:
    """Data marked with ``N_`` (a product's name, a test card), in the page's language.

    A template's ``_()`` marks its result safe HTML, as it should for the template's own words;
    data goes through this filter instead (``{{ product.name|t }}``) and is escaped like any value.
    """
    return _(text) if text else text


def format_number(value: int) -> str:
    """100,000 in English, 100 000 in Ukrainian and Russian."""
    return format_decimal(value, locale=current_language())


def language_url(code: str) -> str:
    """This page in another language (the switcher's links): the same path and query, with ``lang``."""
    args = {name: value for name, value in request.args.items() if name != "lang"}
    return f"{request.path}?{urlencode({**args, 'lang': code})}"


def register_i18n(app: Flask) -> None:
    app.config.setdefault("BABEL_DEFAULT_LOCALE", DEFAULT)
    app.config.setdefault("BABEL_TRANSLATION_DIRECTORIES", "translations")  # checkout/translations
    Babel(app, locale_selector=select_locale)
    app.add_template_filter(format_when, "when")
    app.add_template_filter(translated, "t")
    app.add_template_filter(format_number, "number")

    @app.before_request
    def _remember_the_asked_language() -> None:
        asked = _asked()
        if asked and session.get(SESSION_KEY) != asked and not request.path.startswith(ENGLISH_ONLY_PREFIXES):
            session[SESSION_KEY] = asked

    @app.context_processor
    def _language() -> dict[str, object]:
        return {"languages": LANGUAGES, "current_language": current_language(), "language_url": language_url}


# Prices as money, from integer cents (never floats), written the way the page's language writes them.
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
