"""The concepts page (/lab/concepts) and the README's "The ideas, mapped": every place they cite exists.

Files, functions, pages, exercises, commands and tests are looked up in the
repository as it is (``ast`` for Python, the app's URL map for pages), so a
rename anywhere fails here instead of leaving the page pointing at nothing.
The last tests pin down the behaviours the concepts state that no other test
covers.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import re
from datetime import timedelta
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner
from markupsafe import escape

from checkout.database import utcnow
from checkout.extensions import db
from checkout.idempotency import IdempotencyRecord
from checkout.lab.concepts import CONCEPTS, PAGES, Concept, InLab
from checkout.lab.exercises import EXERCISES
from checkout.shop.models import Cart
from tests.helpers import ALICE, Ledger, add_to_cart, form_fields, order_body

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
IDS = [concept.slug for concept in CONCEPTS]


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


def missing_place(path: str, name: str | None) -> str | None:
    """Why ``path`` (and ``name`` in it) cannot be found, or None."""
    if not (ROOT / path).is_file():
        return f"{path}: no such file"
    if name is None:
        return None
    if path.endswith(".py"):
        return None if name in defined_names(path) else f"{path}: defines no {name}"
    return None if name in (ROOT / path).read_text() else f"{path}: does not mention {name}"


def missing_test(reference: str) -> str | None:
    path, _, name = reference.partition("::")
    if not path.startswith("tests/") or not name.startswith("test_"):
        return f"{reference}: not a tests/…::test_… reference"
    return missing_place(path, name)


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def missing_command(command: str, runner: FlaskCliRunner) -> str | None:
    """Why a command a concept tells a workshop to run would not work, or None."""
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


# --- the data ---------------------------------------------------------------------------


def test_slugs_and_titles_are_unique_and_every_idea_is_two_to_five_sentences() -> None:
    assert len(CONCEPTS) >= 10
    assert len({c.slug for c in CONCEPTS}) == len(CONCEPTS)
    assert len({c.title for c in CONCEPTS}) == len(CONCEPTS)
    for concept in CONCEPTS:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", concept.slug), concept.slug
        assert 2 <= len(concept.idea) <= 5, concept.slug
        assert all(sentence.endswith(".") for sentence in concept.idea), concept.slug
        assert concept.app and concept.lab and concept.tests, concept.slug


@pytest.mark.parametrize("concept", CONCEPTS, ids=IDS)
def test_every_file_and_name_a_concept_cites_exists(concept: Concept) -> None:
    problems = [missing_place(place.path, place.name) for place in concept.app]
    assert [problem for problem in problems if problem] == []


@pytest.mark.parametrize("concept", CONCEPTS, ids=IDS)
def test_every_test_a_concept_cites_exists(concept: Concept) -> None:
    problems = [missing_test(reference) for reference in concept.tests]
    assert [problem for problem in problems if problem] == []


def test_every_page_exercise_and_command_a_concept_cites_exists(app: Flask, runner: FlaskCliRunner) -> None:
    endpoints = {rule.endpoint for rule in app.url_map.iter_rules()}
    assert set(PAGES) <= endpoints
    slugs = {exercise.slug for exercise in EXERCISES}
    problems: list[str] = []
    for concept in CONCEPTS:
        for place in concept.lab:
            pointers = [pointer for pointer in (place.page, place.exercise, place.command) if pointer]
            if len(pointers) > 1:
                problems.append(f"{concept.slug}: {place.what}: more than one place")
            if place.page and place.page not in PAGES:
                problems.append(f"{concept.slug}: {place.page} is not in PAGES")
            if place.exercise and place.exercise not in slugs:
                problems.append(f"{concept.slug}: no exercise {place.exercise}")
            if place.command:
                problems.append(missing_command(place.command, runner) or "")
    assert [problem for problem in problems if problem] == []


# --- the page ---------------------------------------------------------------------------


class _Page(HTMLParser):
    """The headings (level, text), links (href, text), ids and inline styles or scripts of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[tuple[int, str]] = []
        self.links: list[tuple[str, str]] = []
        self.ids: set[str] = set()
        self.inline: list[str] = []
        self._heading: int | None = None
        self._link: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if attributes.get("id"):
            self.ids.add(attributes["id"] or "")
        inline_script = tag == "script" and not attributes.get("src")  # a script file of our own is fine
        if (
            "style" in attributes
            or inline_script
            or tag == "style"
            or any(name.startswith("on") for name in attributes)
        ):
            self.inline.append(tag)
        if re.fullmatch(r"h[1-6]", tag):
            self._heading, self._text = int(tag[1]), []
        elif tag == "a":
            self._link, self._text = attributes.get("href") or "", []

    def handle_data(self, data: str) -> None:
        self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        text = " ".join("".join(self._text).split())
        if self._heading is not None and tag == f"h{self._heading}":
            self.headings.append((self._heading, text))
            self._heading = None
        elif self._link is not None and tag == "a":
            self.links.append((self._link, text))
            self._link = None


def read_page(client: FlaskClient, path: str) -> tuple[str, _Page]:
    response = client.get(path)
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    page = _Page()
    page.feed(html)
    return html, page


def _lab_text(place: InLab) -> str:
    return str(escape(place.what)).split("`")[0]


def test_the_concepts_page_renders_every_concept_and_every_place(client: FlaskClient) -> None:
    html, _page = read_page(client, "/lab/concepts")
    for concept in CONCEPTS:
        start = html.index(f'<section class="card concept" id="{concept.slug}" data-testid="concept-{concept.slug}"')
        section = html[start : html.index("</section>", start)]
        assert f">{escape(concept.title)}</h2>" in section
        for place in concept.app:
            assert f"<code>{place.path}</code>" in section
            if place.name:
                assert f"<code>{place.name}</code>" in section
        for lab in concept.lab:
            assert _lab_text(lab) in section
            if lab.command:
                assert f"<code>{escape(lab.command)}</code>" in section
        for reference in concept.tests:
            assert f"<code>{reference}</code>" in section


def test_the_concepts_page_is_accessible_and_every_link_leads_somewhere(client: FlaskClient) -> None:
    _html, page = read_page(client, "/lab/concepts")
    levels = [level for level, _text in page.headings]
    assert levels[0] == 1 and levels.count(1) == 1
    assert all(later <= earlier + 1 for earlier, later in itertools.pairwise(levels)), page.headings
    assert all(text for _level, text in page.headings)
    assert page.inline == []  # the Content-Security-Policy forbids inline styles and scripts
    for href, text in page.links:
        assert text and text.lower() not in ("here", "click here", "link", "more"), href
        target = urlsplit(href)
        if not target.path:
            assert target.fragment in page.ids, href
            continue
        assert client.get(target.path).status_code < 400, href
        if target.fragment and target.path == "/lab/exercises":
            assert target.fragment in read_page(client, target.path)[1].ids, href


def test_the_lab_and_the_exercises_link_to_the_concepts(client: FlaskClient) -> None:
    for path in ("/lab", "/lab/exercises"):
        _html, page = read_page(client, path)
        assert any(href == "/lab/concepts" for href, _text in page.links), path


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_LAB": False}])
def test_with_the_lab_off_the_concepts_page_is_404(client: FlaskClient, app_overrides: dict[str, Any]) -> None:
    assert client.get("/lab/concepts").status_code == 404


# --- the README -------------------------------------------------------------------------


def readme_section() -> str:
    start = README.index("\n## The ideas, mapped\n")
    assert README.index("\n## The workshop\n") < start < README.index("\n## The JSON API\n")
    return README[start : README.index("\n## ", start + 1)]


def test_the_readme_maps_every_concept_and_every_place_it_names_exists() -> None:
    section = readme_section()
    headings = re.findall(r"^### (.+)$", section, re.MULTILINE)
    assert headings == [concept.title for concept in CONCEPTS]
    problems: list[str | None] = []
    for code in re.findall(r"`([^`]+)`", section):
        for part in code.split():
            path, _, name = part.partition("::")
            if re.fullmatch(r"(checkout|tests|templates|static)/[\w/.-]+\.\w+", path):
                problems.append(missing_test(part) if name else missing_place(path, None))
    assert [problem for problem in problems if problem] == []
    # Functions are named as the rest of the README names them: `checkout/file.py` (`name`, `Class.method`).
    cited = [
        (path, name)
        for path, names in re.findall(r"`([\w/.-]+\.py)` \(((?:`[\w.]+`(?:, )?)+)\)", section)
        for name in re.findall(r"`([\w.]+)`", names)
    ]
    assert len(cited) >= len(CONCEPTS)
    assert [f"{path}: {name}" for path, name in cited if missing_place(path, name)] == []


# --- what the concepts state that no other test pins down ---------------------------------


def cart_version(app: Flask) -> int:
    with app.app_context():
        version = db.session.scalar(sa.select(Cart.version))
        db.session.remove()
    assert version is not None
    return int(version)


def test_pressing_add_to_cart_twice_adds_two(client: FlaskClient) -> None:
    add_to_cart(client)
    add_to_cart(client)
    assert 'data-testid="cart-count">2<' in client.get("/cart").get_data(as_text=True)


def test_removing_a_cart_line_twice_changes_nothing_the_second_time(app: Flask, client: FlaskClient) -> None:
    add_to_cart(client)
    add_to_cart(client, "TEE-01")
    csrf = form_fields(client.get("/cart").get_data(as_text=True), form_id=None)["csrf_token"]
    assert client.post("/cart/items/MUG-01/delete", data={"csrf_token": csrf}).status_code == 303
    once = cart_version(app)
    assert client.post("/cart/items/MUG-01/delete", data={"csrf_token": csrf}).status_code == 303
    assert cart_version(app) == once
    assert 'data-testid="cart-count">1<' in client.get("/cart").get_data(as_text=True)


def test_after_the_purge_a_changed_body_under_the_old_key_gets_the_old_order(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    key = "purged-key-reused-0001"
    first = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": key})
    assert first.status_code == 201
    with app.app_context():
        db.session.execute(sa.update(IdempotencyRecord).values(expires_at=utcnow() - timedelta(seconds=1)))
        db.session.commit()
    assert "purged 1" in runner.invoke(args=["idempotency", "purge"]).output
    changed = order_body(email="mallory@example.com", items=[{"sku": "TEE-01", "quantity": 1}])
    late = client.post("/api/orders", json=changed, headers={**ALICE, "Idempotency-Key": key})
    # No fingerprint is left to refuse it (no 422), and no stored response to replay: the orders'
    # unique (customer, idempotency key) finds the first order, and that order is the answer.
    assert late.status_code == 201
    assert late.get_data() == first.get_data()
    assert "Idempotent-Replayed" not in late.headers
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
