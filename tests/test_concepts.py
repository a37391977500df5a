"""The concepts page (/lab/concepts), and the behaviours the concepts state that no other test pins down.

The concepts' text is content/<language>/concepts/*.md; tests/test_content.py checks every file, name,
test, link and command those files cite, and that the three languages say the same.
"""

from __future__ import annotations

import itertools
import re
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient, FlaskCliRunner
from markupsafe import escape

from checkout.extensions import db
from checkout.lab import content
from checkout.shop.models import Cart
from tests.helpers import ALICE, Ledger, add_to_cart, form_fields, order_body, purge_every_record

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


@pytest.mark.parametrize("language", ["en", "uk"])
def test_the_concepts_page_renders_every_concept_and_every_place(
    app: Flask, client: FlaskClient, language: str
) -> None:
    html, _page = read_page(client, f"/lab/concepts?lang={language}")
    with app.test_request_context():
        for concept in content.concepts(language):
            start = html.index(
                f'<section class="card concept" id="{concept.slug}" data-testid="concept-{concept.slug}"'
            )
            section = html[start : html.index("</section>", start)]
            assert f">{escape(concept.title)}</h2>" in section
            assert f'<p class="idea">{content.inline(concept.idea)}</p>' in section
            for place in (*concept.app, *concept.lab):
                assert f"<li>{content.inline(place)}</li>" in section
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


def test_after_the_purge_a_changed_body_under_the_old_key_is_told_apart_by_its_order(
    app: Flask, client: FlaskClient, runner: FlaskCliRunner, ledger: Ledger
) -> None:
    key = "purged-key-reused-0001"
    first = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": key})
    assert first.status_code == 201
    assert "purged 1" in purge_every_record(app, runner)
    # No fingerprint is left, and no stored response: the orders' unique (customer, idempotency key) finds the
    # first order, and the request is compared with what that order keeps (items, email, the card's last four).
    for changed in (
        order_body(email="mallory@example.com"),
        order_body(items=[{"sku": "TEE-01", "quantity": 1}]),
        order_body(card="5555 5555 5555 4444"),
    ):
        refused = client.post("/api/orders", json=changed, headers={**ALICE, "Idempotency-Key": key})
        assert refused.status_code == 422, changed
        assert refused.get_json()["type"].endswith("idempotency-key-reused")
    late = client.post("/api/orders", json=order_body(), headers={**ALICE, "Idempotency-Key": key})
    assert late.status_code == 201
    assert late.get_data() == first.get_data()  # rebuilt from the order, the same bytes
    assert "Idempotent-Replayed" not in late.headers
    assert len(ledger.orders()) == 1 and len(ledger.succeeded_charges()) == 1
