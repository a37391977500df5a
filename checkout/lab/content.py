"""The lab's teaching text: Markdown files under content/<language>/, read and rendered in one place.

One file per language, so the prose reads on GitHub and is translated as a whole; a part is found by its place.
Rendering has raw HTML and images off: the text is data, escaped like any other.
Design: docs/design.md#checkoutlabcontentpy-the-teaching-text
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml
from flask import has_request_context, request, url_for
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup

from checkout.i18n import DEFAULT, current_language

ROOT = Path(__file__).resolve().parents[2] / "content"
KINDS = ("concepts", "exercises", "mistakes")
NUMBERED = re.compile(r"\d+-")  # an exercise's file name starts with its number: 01-double-click.md
# A link to another content file, as it works on GitHub: ../exercises/01-double-click.md#anchor
CONTENT_LINK = re.compile(r"\.\./(concepts|exercises|mistakes)/([\w-]+)\.md(?:#[\w-]*)?")
FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)


class ContentError(ValueError):
    """A content file that does not have the shape its page needs (said with the file's path)."""


def _link_open(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    token = tokens[idx]
    token.attrSet("href", lab_href(str(token.attrGet("href") or "")))
    return self.renderToken(tokens, idx, options, env)


MARKDOWN = MarkdownIt("commonmark", {"html": False}).disable("image")
MARKDOWN.add_render_rule("link_open", _link_open)


def lab_href(href: str) -> str:
    """Where a link in a content file leads in the app: a content file becomes its lab page, a page of the shop
    as ``make run`` serves it (``http://127.0.0.1:5000/lab``, which works from the file too) becomes the app's own
    path (under its root, on whatever address serves it); anything else is an error, caught by the content test."""
    linked = CONTENT_LINK.fullmatch(href)
    if linked:
        kind, stem = linked.groups()
        slug = slug_of(Path(kind, stem))
        if kind == "mistakes":
            return url_for("mistakes.show", name=slug)
        return url_for(f"lab.{kind}", _anchor=slug)
    here = request.host_url.rstrip("/") if has_request_context() else WRITTEN_FOR  # for_this_shop put it there
    for origin in (WRITTEN_FOR, here):
        path = href.removeprefix(origin)
        if path != href and path.startswith("/") and not path.startswith("//"):
            return (request.script_root if has_request_context() else "") + path
    raise ContentError(
        f"{href}: a content file links only to ../<kind>/<file>.md or to a page of the shop as make run serves it, "
        f"such as {WRITTEN_FOR}/lab"
    )


# The address the content files are written for (make run's), and the commands that take a shop's address.
WRITTEN_FOR = "http://127.0.0.1:5000"
AN_ADDRESS = re.compile(r"https?://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?|https?://\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?")
ADDRESSED_COMMANDS = re.compile(r"(-m checkout\.(?:client|lab\.mass))(?![^\n]*--url)")


def for_this_shop(text: str) -> str:
    """A content file's commands and addresses as they work against the shop the reader is looking at: its own
    address (another port, a proxy) in place of make run's, and given to the retry client and the mass test,
    which would otherwise try make run's address."""
    here = request.host_url.rstrip("/") if has_request_context() else WRITTEN_FOR
    if here == WRITTEN_FOR or not AN_ADDRESS.fullmatch(here):  # a Host header that is no address: as written
        return text
    return ADDRESSED_COMMANDS.sub(rf"\1 --url {here}", text.replace(WRITTEN_FOR, here))


def inline(text: str) -> Markup:
    """One paragraph or list item of a content file, as HTML (the templates' ``|md`` filter)."""
    return Markup(MARKDOWN.renderInline(for_this_shop(text)).strip())


@dataclass(frozen=True)
class Part:
    """The text before the first ``##`` heading (heading ""), or one ``##`` section."""

    heading: str
    shape: tuple[str, ...]  # its blocks in order: "p" a paragraph, "ol" or "ul" a list, "code" a code block
    paragraphs: tuple[str, ...]  # each as Markdown source on one line
    items: tuple[str, ...]  # the items of its list, each on one line
    code: tuple[str, ...]  # its fenced code blocks, as written


@dataclass(frozen=True)
class Document:
    kind: str
    slug: str
    path: Path  # the file read
    language: str  # the file's language: English only where the asked language has no file
    meta: Mapping[str, Any]  # the whole front matter
    parts: tuple[Part, ...]

    @property
    def title(self) -> str:
        return str(self.meta["title"])

    @property
    def order(self) -> int:
        return int(self.meta["order"])

    @property
    def code(self) -> tuple[str, ...]:
        """The code it cites: ``path`` or ``path::name``."""
        return tuple(str(place) for place in self.meta.get("code") or ())

    @property
    def tests(self) -> tuple[str, ...]:
        """The tests that prove it: ``tests/…/test_file.py::test_name``."""
        return tuple(str(test) for test in self.meta.get("tests") or ())

    def shaped(self, *shapes: str) -> tuple[Part, ...]:
        """Its parts, if they have the shapes a page needs, one per part: ``"p"``, ``"ol code"``..."""
        found = tuple(" ".join(part.shape) for part in self.parts)
        if found != shapes:
            raise ContentError(f"{self.path}: its parts are {found}, and its page needs {shapes}")
        return self.parts


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    found = FRONT_MATTER.match(text)
    if found is None:
        raise ContentError("no front matter: a content file opens with ---, its YAML, then ---")
    meta = yaml.safe_load(found.group(1))
    if not isinstance(meta, dict):
        raise ContentError("its front matter is not a mapping")
    return meta, text[found.end() :]


def _one_line(source: str) -> str:
    """A paragraph's lines joined by spaces (no-break spaces, as in "0,00\u00a0$", stay as they are)."""
    return re.sub(r"[ \t\n]+", " ", source).strip()


def parse_parts(body: str) -> tuple[Part, ...]:
    """The body's parts, from markdown-it's token stream (so what counts as a list or a heading is what
    GitHub sees too). Lists are flat, one paragraph an item: each item is one step or one place."""
    parts: list[Part] = []
    heading = ""
    shape: list[str] = []
    paragraphs: list[str] = []
    items: list[str] = []
    code: list[str] = []
    tokens = MARKDOWN.parse(body)
    for at, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h2":
            parts.append(Part(heading, tuple(shape), tuple(paragraphs), tuple(items), tuple(code)))
            heading, shape, paragraphs, items, code = _one_line(tokens[at + 1].content), [], [], [], []
        elif token.type == "heading_open":
            raise ContentError(f"an {token.tag} heading: a body's sections are ## headings, and only those")
        elif token.type in ("bullet_list_open", "ordered_list_open"):
            if token.level:
                raise ContentError("a list inside a list: the pages show flat lists")
            shape.append(token.tag)
        elif token.type == "inline" and tokens[at - 1].type == "paragraph_open":
            if tokens[at - 1].level == 0:
                shape.append("p")
                paragraphs.append(_one_line(token.content))
            elif tokens[at - 2].type == "list_item_open":
                items.append(_one_line(token.content))
            else:
                raise ContentError("a list item of more than one paragraph")
        elif token.type in ("fence", "code_block"):
            shape.append("code")
            code.append(token.content)
        elif token.type in ("blockquote_open", "hr", "html_block", "table_open"):
            raise ContentError(f"a {token.type}: the lab's pages have no place for it")
    parts.append(Part(heading, tuple(shape), tuple(paragraphs), tuple(items), tuple(code)))
    return tuple(parts)


@lru_cache(maxsize=512)
def _read(path: Path, _modified_ns: int) -> tuple[dict[str, Any], tuple[Part, ...]]:
    """Parsed once per version of the file: an edited file shows on the next request."""
    try:
        meta, body = split_front_matter(path.read_text(encoding="utf-8"))
        return meta, parse_parts(body)
    except (ContentError, yaml.YAMLError) as error:
        raise ContentError(f"{path}: {error}") from error


def slug_of(path: Path) -> str:
    """What a file's name says it is: ``no-key.md`` is no-key, ``01-double-click.md`` is double-click."""
    return NUMBERED.sub("", path.stem, count=1) if path.parent.name == "exercises" else path.stem


def read(path: Path, kind: str, language: str) -> Document:
    meta, parts = _read(path, path.stat().st_mtime_ns)
    slug = slug_of(path)
    if meta.get("slug") != slug:
        raise ContentError(f"{path}: its slug is {meta.get('slug')!r}, and its file name says {slug!r}")
    return Document(kind, slug, path, language, MappingProxyType(meta), parts)


def files(kind: str, language: str = DEFAULT) -> dict[str, Path]:
    """The files of one kind in one language, by slug."""
    return {slug_of(path): path for path in sorted((ROOT / language / kind).glob("*.md"))}


def document(kind: str, slug: str, language: str | None = None) -> Document:
    """One file in the page's language (or ``language``), English where that language has none."""
    language = language or current_language()
    english = files(kind)
    if slug not in english:
        raise ContentError(f"content/{DEFAULT}/{kind}: no file for {slug!r}")
    localized = ROOT / language / kind / english[slug].name
    if localized.is_file():
        return read(localized, kind, language)
    return read(english[slug], kind, DEFAULT)


def documents(kind: str, language: str | None = None) -> tuple[Document, ...]:
    """Every file of one kind, in the order their front matter gives: the English files say which exist."""
    return tuple(sorted((document(kind, slug, language) for slug in files(kind)), key=lambda doc: doc.order))


# --- what each page reads of its files ----------------------------------------------------------------


@dataclass(frozen=True)
class Concept:
    slug: str
    title: str
    idea: str  # one paragraph
    app: tuple[str, ...]  # "`name` in `path`: what it does there", one per place cited
    lab: tuple[str, ...]  # "[a page or an exercise](…): what a workshop sees there", or "`command`: …"
    tests: tuple[str, ...]


def concepts(language: str | None = None) -> tuple[Concept, ...]:
    """/lab/concepts: an idea, then ## In the app, ## In the lab; the tests come from the front matter."""
    found = []
    for doc in documents("concepts", language):
        idea, app, lab = doc.shaped("p", "ul", "ul")
        found.append(Concept(doc.slug, doc.title, idea.paragraphs[0], app.items, lab.items, doc.tests))
    return tuple(found)


@dataclass(frozen=True)
class Exercise:
    slug: str
    title: str
    steps: tuple[str, ...]
    expect: str
    layer: str  # the layer of the defence at work
    tests: tuple[str, ...]


def exercises(language: str | None = None) -> tuple[Exercise, ...]:
    """/lab/exercises: the numbered steps, then ## Expect, ## Layer at work."""
    found = []
    for doc in documents("exercises", language):
        steps, expect, layer = doc.shaped("ol", "p", "p")
        found.append(Exercise(doc.slug, doc.title, steps.items, expect.paragraphs[0], layer.paragraphs[0], doc.tests))
    return tuple(found)


@dataclass(frozen=True)
class MistakeText:
    title: str
    trigger: str  # the situation that breaks it, in a few words (front matter)
    what: str
    steps: tuple[str, ...]
    commands: str  # the trigger from a terminal: the one code block
    look_for: str
    fix: str
    code: tuple[str, ...]  # where the fix lives: path::name
    tests: tuple[str, ...]


def mistake(name: str, language: str | None = None) -> MistakeText:
    """A mistake's page: ## What goes wrong, ## Trigger it (steps, then commands), ## What to look for,
    ## Where the fix lives; its title and trigger come from the front matter."""
    doc = document("mistakes", name, language)
    _nothing, what, trigger, look_for, fix = doc.shaped("", "p", "ol code", "p", "p")
    return MistakeText(
        title=doc.title,
        trigger=str(doc.meta["trigger"]),
        what=what.paragraphs[0],
        steps=trigger.items,
        commands=trigger.code[0].rstrip("\n"),
        look_for=look_for.paragraphs[0],
        fix=fix.paragraphs[0],
        code=doc.code,
        tests=doc.tests,
    )
