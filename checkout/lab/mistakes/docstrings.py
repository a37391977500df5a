"""Each mistake explains itself in its module's docstring; this reads it, for the pages and for pybabel.

The title, "THE MISTAKE: ..." and "THE FIX in the safe code: ..." are written once, beside
the wrong code. ``extract`` is a Babel extractor (named in babel.cfg) that hands the same
sentences to the catalogs, so the pages can show them in the reader's language.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

MISTAKE_OPENING = "THE MISTAKE:"
FIX_OPENING = "THE FIX in the safe code:"
_TWIN = re.compile(r"[a-z][a-z-]*: ")  # a twin's docstring opens with its name: "no-key: no key at all."


@dataclass(frozen=True)
class Explanation:
    """What a mistake's page shows of its docstring, and what the catalogs translate: the same three strings."""

    title: str  # the first line after the name, without its full stop
    what: str  # the "THE MISTAKE:" paragraph, as one line, capitalised
    fix: str  # the "THE FIX in the safe code:" paragraph, as one line


def explanation(docstring: str) -> Explanation | None:
    """The explanation a twin's docstring gives; None for any other module (the catalog, the plumbing)."""
    if not _TWIN.match(docstring.strip()):
        return None
    what, fix = _paragraph(docstring, MISTAKE_OPENING), _paragraph(docstring, FIX_OPENING)
    if what is None or fix is None:
        return None
    title = docstring.strip().splitlines()[0].split(": ", 1)[1].rstrip(".")
    return Explanation(title, what[:1].upper() + what[1:], fix)


def _paragraph(docstring: str, opening: str) -> str | None:
    """The paragraph that starts with ``opening``, as one line of text, without the opening."""
    for block in re.split(r"\n\s*\n", docstring):
        text = " ".join(block.split())
        if text.startswith(opening):
            return text[len(opening) :].strip()
    return None


def extract(
    fileobj: IO[bytes], keywords: Mapping[str, Any], comment_tags: Collection[str], options: Mapping[str, Any]
) -> Iterator[tuple[int, str | None, str | tuple[str, ...], list[str]]]:
    """The usual Python messages of a mistake's module, and the sentences of its docstring."""
    from babel.messages.extract import extract_python  # pybabel's own machinery: imported only when it runs

    source = fileobj.read()
    fileobj.seek(0)
    yield from extract_python(fileobj, keywords, comment_tags, options)  # type: ignore[misc,arg-type]
    found = explanation(ast.get_docstring(ast.parse(source), clean=True) or "")
    if found is not None:
        note = ["TRANSLATORS: from this mistake's module docstring; keep file paths and function names as they are."]
        for text in (found.title, found.what, found.fix):
            yield 1, None, text, note
