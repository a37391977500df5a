"""Each mistake explains itself in its module's docstring; this reads it, for the pages and for pybabel.

The title, "THE MISTAKE: ..." and "THE FIX in the safe code: ..." are written once, beside
the wrong code. ``extract`` is a Babel extractor (named in babel.cfg) that hands the same
sentences to the catalogs, so the pages can show them in the reader's language.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Iterator, Mapping
from typing import IO, Any

from babel.messages.extract import extract_python

MISTAKE_OPENING = "THE MISTAKE:"
FIX_OPENING = "THE FIX in the safe code:"


def first_line(docstring: str) -> str:
    return docstring.strip().splitlines()[0]


def title_of(line: str) -> str:
    """'no-key: no key at all (...).' -> 'no key at all (...)'."""
    return line.split(": ", 1)[1].rstrip(".")


def paragraph(docstring: str, opening: str) -> str | None:
    """The paragraph that starts with ``opening``, as one line of text, without the opening."""
    for block in re.split(r"\n\s*\n", docstring):
        text = " ".join(block.split())
        if text.startswith(opening):
            return text[len(opening) :].strip()
    return None


def capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def extract(
    fileobj: IO[bytes], keywords: Mapping[str, Any], comment_tags: Collection[str], options: Mapping[str, Any]
) -> Iterator[tuple[int, str | None, str | tuple[str, ...], list[str]]]:
    """The usual Python messages of a mistake's module, and the sentences of its docstring."""
    source = fileobj.read()
    fileobj.seek(0)
    yield from extract_python(fileobj, keywords, comment_tags, options)  # type: ignore[misc,arg-type]
    docstring = ast.get_docstring(ast.parse(source), clean=True)
    if not docstring or not re.match(r"[a-z][a-z-]*: ", docstring) or MISTAKE_OPENING not in docstring:
        return  # not a twin's module (the catalog, the plumbing)
    note = ["TRANSLATORS: from this mistake's module docstring; keep file paths and function names as they are."]
    yield 1, None, title_of(first_line(docstring)), note
    what, fix = paragraph(docstring, MISTAKE_OPENING), paragraph(docstring, FIX_OPENING)
    if what:
        yield 1, None, capitalised(what), note  # as Mistake.what shows it
    if fix:
        yield 1, None, fix, note
