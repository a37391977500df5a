"""The lab's teaching text (content/<language>/): what it cites exists, and its three languages say the same.

This is the one place that checks the Markdown files, so no other test keeps a copy of their words:

- every file and ``path::name`` a front matter cites exists (``ast`` for Python), and every test it cites;
- every link leads to another content file or to a page of the app, and every command it gives exists;
- every English file has a Ukrainian and a Russian one with the same headings, the same parts, the same
  code (byte for byte, blocks and inline, but for a block's shell comments, which are prose), the same links
  and the same front matter but for its prose;
- every concept, exercise and mistake the lab lists has its three files, and each page shows them in the
  language asked, never English in their place.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner
from markupsafe import escape
from werkzeug.exceptions import HTTPException

from checkout.lab import content
from checkout.lab.content import MARKDOWN, ContentError, Document
from checkout.lab.mistakes.catalog import MISTAKES

ROOT = Path(__file__).resolve().parent.parent
TRANSLATED = ("uk", "ru")
PROSE = {"title", "trigger"}  # the front matter's words: every other key is the same in every language
PAGES = {"concepts": "/lab/concepts", "exercises": "/lab/exercises"}
ENGLISH = [doc for kind in content.KINDS for doc in content.documents(kind, "en")]
IDS = [f"{doc.kind}/{doc.slug}" for doc in ENGLISH]


@cache
def defined_names(path: str) -> frozenset[str]:
    """The functions, classes, methods (``Class.method``) and module-level names a Python file defines."""
    tree = ast.parse((ROOT / path).read_text(), filename=path)
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                names.update(
                    f"{node.name}.{item.name}"
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                )
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def missing_place(reference: str) -> str | None:
    """Why ``path`` or ``path::name`` cannot be found, or None."""
    path, _, name = reference.partition("::")
    if not (ROOT / path).is_file():
        return f"{path}: no such file"
    if not name:
        return None
    if path.endswith(".py"):
        return None if name in defined_names(path) else f"{path}: defines no {name}"
    return None if name in (ROOT / path).read_text() else f"{path}: does not mention {name}"


def missing_test(reference: str) -> str | None:
    path, _, name = reference.partition("::")
    if not path.startswith("tests/") or not name.startswith("test_"):
        return f"{reference}: not a tests/…::test_… reference"
    return missing_place(reference)


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def missing_command(command: str, runner: FlaskCliRunner) -> str | None:
    """Why a command a content file tells a workshop to run would not work, or None."""
    words = command.replace(".venv/bin/", "", 1).split()  # commands are written as a newcomer types them
    if words[:3] == ["flask", "--app", "checkout"]:
        result = runner.invoke(args=[*words[3:], "--help"])
        return None if result.exit_code == 0 else f"{command}: no such flask command"
    if words[:2] == ["python", "-m"]:
        spec = importlib.util.find_spec(words[2])
        if spec is None or spec.origin is None:
            return f"{command}: no module {words[2]}"
        source = Path(spec.origin).read_text()
        unknown = [word for word in words[3:] if word.startswith("--") and f'"{word}"' not in source]
        return f"{command}: the module takes no {unknown}" if unknown else None
    if words[0] == "make":
        return None if words[1] in makefile_targets() else f"{command}: no such make target"
    return f"{command}: not a flask, python -m or make command"


# A shell comment in a shell block (``sh`` or no language) is prose: translated, so compared only by where it is.
SHELL_COMMENT = re.compile(r"(^|\s)# .*$", re.MULTILINE)


def tokens_of(doc: Document) -> list[tuple[str, str]]:
    """What must be the same in every language: (what, which) for each heading, code span, code block, link."""
    _meta, body = content.split_front_matter(doc.path.read_text(encoding="utf-8"))
    found: list[tuple[str, str]] = []
    for token in MARKDOWN.parse(body):
        if token.type == "heading_open":
            found.append(("heading", token.tag))
        elif token.type in ("fence", "code_block"):
            shell = token.type == "fence" and token.info.strip() in ("", "sh")
            found.append(("code block", SHELL_COMMENT.sub(r"\1#", token.content) if shell else token.content))
        for child in token.children or ():
            if child.type == "code_inline":
                found.append(("code", child.content))
            elif child.type == "link_open":
                found.append(("link", str(child.attrGet("href"))))
    return found


def commands_in(doc: Document) -> list[str]:
    """The commands it gives: inline code and code-block lines that start as a newcomer types one."""
    found = [code for what, code in tokens_of(doc) if what == "code"]
    found += [line for what, block in tokens_of(doc) if what == "code block" for line in block.splitlines()]
    return [command.split("  #")[0] for command in found if command.startswith((".venv/bin/", "make "))]


def links_in(doc: Document) -> list[str]:
    return [href for what, href in tokens_of(doc) if what == "link"]


# --- what the English files cite ------------------------------------------------------------


@pytest.mark.parametrize("doc", ENGLISH, ids=IDS)
def test_every_file_and_name_a_content_file_cites_exists(doc: Document) -> None:
    assert [problem for problem in map(missing_place, doc.code) if problem] == []


@pytest.mark.parametrize("doc", ENGLISH, ids=IDS)
def test_every_test_a_content_file_cites_exists(doc: Document) -> None:
    assert doc.tests, f"{doc.path}: no test proves it"
    assert [problem for problem in map(missing_test, doc.tests) if problem] == []


def test_every_link_leads_to_a_content_file_or_a_page_of_the_app(app: Flask) -> None:
    urls = app.url_map.bind("localhost")
    problems = []
    for doc in ENGLISH:
        for href in links_in(doc):
            target = content.CONTENT_LINK.fullmatch(href)
            if target:
                linked = (doc.path.parent / href.split("#")[0]).resolve()
                if not linked.is_file():
                    problems.append(f"{doc.path.name}: {href}: no such file")
                continue
            path = href.removeprefix(content.WRITTEN_FOR)  # as make run serves it: the link works from the file too
            if path == href:
                problems.append(f"{doc.path.name}: {href}: not a page of the shop at {content.WRITTEN_FOR}")
                continue
            try:
                urls.match(path, method="GET")
            except HTTPException:
                problems.append(f"{doc.path.name}: {href}: no page of the app")
    assert problems == []


def test_every_command_a_content_file_gives_exists(runner: FlaskCliRunner) -> None:
    problems = [missing_command(command, runner) for doc in ENGLISH for command in commands_in(doc)]
    assert [problem for problem in problems if problem] == []


def test_a_concepts_places_in_the_app_are_what_its_front_matter_cites() -> None:
    """Each item of ## In the app opens with what it names: `name` in `path`, or `path`, in the cited order."""
    for language in ("en", *TRANSLATED):
        for concept, doc in zip(content.concepts(language), content.documents("concepts", language), strict=True):
            named = []
            for item in concept.app:
                found = re.match(r"`([^`]+)`(?: \w+ `([^`]+)`)?: ", item)
                assert found, f"{doc.path}: {item[:60]}"
                named.append(f"{found[2]}::{found[1]}" if found[2] else found[1])
            assert named == list(doc.code), doc.path


def test_a_mistakes_fix_names_every_place_its_front_matter_cites() -> None:
    """## Where the fix lives says in words what the page lists: each cited file and function, the first first."""
    for language in ("en", *TRANSLATED):
        for mistake in MISTAKES:
            text = content.mistake(mistake.name, language)
            assert text.fix.startswith(text.code[0].partition("::")[0]), (language, mistake.name)
            for place in text.code:
                path, _, name = place.partition("::")
                assert path in text.fix and name in text.fix, (language, mistake.name, place)
            assert text.tests[0].startswith("tests/test_mistakes.py::"), mistake.name


# --- the three languages --------------------------------------------------------------------


@pytest.mark.parametrize("language", TRANSLATED)
@pytest.mark.parametrize("doc", ENGLISH, ids=IDS)
def test_every_english_file_has_a_translation_with_the_same_headings_code_links_and_tests(
    doc: Document, language: str
) -> None:
    translated = content.document(doc.kind, doc.slug, language)
    assert translated.language == language, f"content/{language}/{doc.kind}/{doc.path.name} is missing"
    assert tokens_of(translated) == tokens_of(doc)
    assert [part.shape for part in translated.parts] == [part.shape for part in doc.parts]
    assert [len(part.items) for part in translated.parts] == [len(part.items) for part in doc.parts]
    assert {k: v for k, v in translated.meta.items() if k not in PROSE} == {
        k: v for k, v in doc.meta.items() if k not in PROSE
    }
    assert all(translated.meta[key] != doc.meta[key] for key in PROSE & set(doc.meta)), "a title left in English"


def test_no_translation_is_a_file_english_lacks() -> None:
    for kind in content.KINDS:
        english = set(content.files(kind))
        for language in TRANSLATED:
            assert set(content.files(kind, language)) <= english, (kind, language)


# --- what the lab lists, and its pages --------------------------------------------------------


def test_the_lab_lists_every_file_in_its_order_and_every_name_once() -> None:
    for kind in content.KINDS:
        docs = content.documents(kind, "en")
        assert [doc.order for doc in docs] == list(range(1, len(docs) + 1)), kind
        assert len({doc.title for doc in docs}) == len(docs), kind
    for doc in content.documents("exercises", "en"):
        assert doc.path.name == f"{doc.order:02d}-{doc.slug}.md"
    assert len(content.concepts("en")) >= 10 and len(content.exercises("en")) >= 14
    assert [doc.slug for doc in content.documents("mistakes", "en")] == [mistake.name for mistake in MISTAKES]


@pytest.mark.parametrize("language", ["en", *TRANSLATED])
@pytest.mark.parametrize("kind", list(PAGES))
def test_each_page_shows_every_file_of_its_language(client: FlaskClient, kind: str, language: str) -> None:
    response = client.get(f"{PAGES[kind]}?lang={language}")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert f'<html lang="{language}"' in html
    for doc in content.documents(kind, language):
        assert doc.language == language
        start = html.index(f'id="{doc.slug}"')
        assert f">{escape(doc.title)}</h2>" in html[start:]


@pytest.mark.parametrize("language", ["en", *TRANSLATED])
def test_each_mistakes_page_shows_its_file_of_its_language(app: Flask, client: FlaskClient, language: str) -> None:
    listed = client.get(f"/lab/mistakes?lang={language}").get_data(as_text=True)
    for mistake in MISTAKES:
        text = content.mistake(mistake.name, language)
        assert content.document("mistakes", mistake.name, language).language == language
        assert f"{escape(text.title[1:])}.</td>" in listed and f"{escape(text.trigger[1:])}.</td>" in listed
        page = client.get(f"/lab/mistakes/{mistake.name}?lang={language}").get_data(as_text=True)
        with app.test_request_context():  # the page's own address (the test client's): commands as they work there
            shown = [text.what, text.look_for, text.fix, *text.steps]
            assert [part for part in shown if str(content.inline(part)) not in page] == []
            assert str(escape(content.for_this_shop(text.commands))) in page


# --- the renderer -----------------------------------------------------------------------------


def test_the_renderer_shows_no_raw_html_and_no_image(app: Flask) -> None:
    with app.test_request_context():
        rendered = content.inline(
            '<script>alert(1)</script> <b onclick="x">b</b> ![a](http://127.0.0.1:5000/static/logo.svg)'
        )
        assert "<script" not in rendered and "<b" not in rendered and "<img" not in rendered
        assert "&lt;script&gt;" in rendered
        assert content.inline("`x` [the lab](http://127.0.0.1:5000/lab)") == '<code>x</code> <a href="/lab">the lab</a>'
        assert content.inline("[1](../exercises/01-double-click.md)") == '<a href="/lab/exercises#double-click">1</a>'
        for elsewhere in ("https://example.com", "/lab", "http://127.0.0.1:5000//example.com"):
            with pytest.raises(ContentError):  # a site-absolute /lab is dead when the file is read on a forge
                content.inline(f"[elsewhere]({elsewhere})")


def test_a_file_that_does_not_have_its_pages_shape_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "concepts" / "broken.md"
    broken.parent.mkdir()
    broken.write_text("---\nslug: broken\ntitle: Broken\norder: 1\n---\n\nAn idea.\n\n## In the app\n\nNo list.\n")
    with pytest.raises(ContentError, match="its page needs"):
        content.read(broken, "concepts", "en").shaped("p", "ul", "ul")


ANOTHER_PORT = "http://127.0.0.1:5077"


@pytest.mark.parametrize(
    "page",
    [
        "/lab/mistakes/no-fingerprint",
        "/lab/mistakes/check-then-insert",
        "/lab/exercises",
        "/lab/concepts",
        "/lab/stores/redis",
        "/lab/reconciliation",
    ],
)
def test_on_another_port_every_command_a_page_shows_names_that_port(client: FlaskClient, page: str) -> None:
    """A command copied from a page works against the shop the reader is looking at, wherever it runs."""
    text = client.get(page, base_url=ANOTHER_PORT).get_data(as_text=True)
    assert "127.0.0.1:5000" not in text
    for command in re.findall(r"-m checkout\.(?:client|lab\.mass)[^<\n]*", text):
        assert f"--url {ANOTHER_PORT}" in command, command


def test_on_make_runs_address_the_commands_are_as_written(client: FlaskClient) -> None:
    text = client.get("/lab/mistakes/no-fingerprint", base_url=content.WRITTEN_FOR).get_data(as_text=True)
    assert "-m checkout.client --path" in text and "--url" not in text
