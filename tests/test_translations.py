"""The Ukrainian and Russian catalogs cover every string of the code and the pages, and compile.

The strings are extracted afresh from checkout/ and templates/ with the project's own babel.cfg and
keywords (the ones ``make translations`` uses), so a string added without a translation fails here,
whether or not anyone ran ``make translations``.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from babel.messages.catalog import PYTHON_FORMAT, Catalog, Message
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
TRANSLATIONS = ROOT / "checkout" / "translations"
LANGUAGES = ("uk", "ru")
KEYWORDS = {**DEFAULT_KEYWORDS, "_l": None, "N_": None}  # as in the Makefile: -k _l -k N_
PLACEHOLDER = PYTHON_FORMAT  # %(name)s, %(n)d, %(x).2f, %%: what gettext's "python-format" means
TAG = re.compile(r"<[^>]+>")


def _msgid(message_id: str | tuple[str, ...]) -> str:
    return message_id if isinstance(message_id, str) else message_id[0]


Key = tuple[str | None, str]  # (context, msgid): pgettext tells one English word's uses apart


def extracted() -> dict[Key, str]:
    """Every msgid (with its context) in the source today, with the first file that uses it."""
    with open(ROOT / "babel.cfg", encoding="utf-8") as config:
        method_map, options_map = parse_mapping_cfg(config)
    found: dict[Key, str] = {}
    for folder in ("checkout", "templates"):
        for filename, _lineno, message, _comments, context in extract_from_dir(
            str(ROOT / folder), method_map, options_map, keywords=KEYWORDS, comment_tags=("TRANSLATORS:",)
        ):
            found.setdefault((context, _msgid(message)), f"{folder}/{filename}")
    return found


@pytest.fixture(scope="module")
def source_strings() -> dict[Key, str]:
    strings = extracted()
    assert len(strings) > 500, "the extraction found too little: is babel.cfg read?"
    return strings


def catalog(language: str) -> Catalog:
    with open(TRANSLATIONS / language / "LC_MESSAGES" / "messages.po", "rb") as po:
        return read_po(po, locale=language)


def translated(message: Message) -> bool:
    forms = message.string if isinstance(message.string, tuple) else (message.string,)
    return bool(forms) and all(form and form.strip() for form in forms) and not message.fuzzy


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_string_of_the_code_and_the_pages_has_a_translation(
    language: str, source_strings: dict[Key, str]
) -> None:
    messages = {(m.context, _msgid(m.id)): m for m in catalog(language) if m.id}
    missing = [f"{where}: {key[1][:70]!r}" for key, where in source_strings.items() if key not in messages]
    untranslated = [
        f"{where}: {key[1][:70]!r}"
        for key, where in source_strings.items()
        if key in messages and not translated(messages[key])
    ]
    assert not missing, f"{len(missing)} strings are not in {language}'s catalog (make translations):\n" + "\n".join(
        missing[:20]
    )
    assert not untranslated, f"{len(untranslated)} strings have no {language} translation (or a fuzzy one):\n" + (
        "\n".join(untranslated[:20])
    )


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_translation_keeps_the_placeholders_of_its_english(language: str) -> None:
    wrong = []
    for message in catalog(language):
        if not message.id or not message.string:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        allowed = {found.group(0) for text in ids for found in PLACEHOLDER.finditer(text)} - {"%%"}
        forms = message.string if isinstance(message.string, tuple) else (message.string,)
        for form in forms:
            used = {found.group(0) for found in PLACEHOLDER.finditer(form)} - {"%%"}
            # A plural form may leave the number out ("одна"), never name a value the English has not.
            if not used <= allowed or (not isinstance(message.id, tuple) and used != allowed):
                wrong.append(f"{_msgid(message.id)[:60]!r}: {sorted(used)} against {sorted(allowed)}")
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_catalog_compiles(language: str) -> None:
    compiled = catalog(language)
    errors = [f"{_msgid(m.id)[:60]!r}: {e}" for m, errs in compiled.check() for e in errs]
    assert not errors, "\n".join(errors[:20])
    buffer = io.BytesIO()
    write_mo(buffer, compiled)
    assert buffer.getbuffer().nbytes > 1000


def test_no_catalog_holds_a_translation_nobody_uses_any_more(source_strings: dict[Key, str]) -> None:
    """Strings gone from the source are cleaned by make translations."""
    for language in LANGUAGES:
        stale = [
            _msgid(m.id)[:60] for m in catalog(language) if m.id and (m.context, _msgid(m.id)) not in source_strings
        ]
        assert not stale, f"{language}: {stale[:10]}"


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_translation_keeps_the_html_of_its_english(language: str) -> None:
    """A translation renders as trusted HTML: it must carry exactly the English's tags (links, <code>,
    data-testid hooks), no fewer and no more."""
    changed = []
    for message in catalog(language):
        if not message.id or not message.string:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        forms = message.string if isinstance(message.string, tuple) else (message.string,)
        expected = sorted(TAG.findall(ids[0]))
        changed += [
            f"{ids[0][:60]!r}: {sorted(TAG.findall(form))}" for form in forms if sorted(TAG.findall(form)) != expected
        ]
    assert not changed, "\n".join(changed[:20])
