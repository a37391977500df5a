"""The engine as a package of its own: what a copier takes, and its Powertools-style decorator in an app that is
not the shop (its own table, its own Flask-SQLAlchemy, no audit trail listening)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask, request
from flask.testing import FlaskClient
from flask_sqlalchemy import SQLAlchemy

from checkout.idempotency import Idempotency, idempotent
from tests.helpers import race

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "checkout" / "idempotency"


def test_the_engine_imports_no_other_module_of_the_project() -> None:
    for source in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert not (node.module or "").startswith("checkout"), (source.name, node.module)
            if isinstance(node, ast.Import):
                assert not any(alias.name.startswith("checkout") for alias in node.names), source.name


def test_what_a_copier_takes_is_at_most_1600_lines_and_no_module_over_450() -> None:
    lengths = {source.name: len(source.read_text().splitlines()) for source in PACKAGE.glob("*.py")}
    assert sum(lengths.values()) <= 1600, lengths
    assert max(lengths.values()) <= 450, lengths


def test_scopes_and_fingerprints_are_made_only_where_a_pipeline_is_defined() -> None:
    """Outside the package, only a module that defines a pipeline names them (a twin whose mistake is its scope rule,
    the lab's Redis store, whose records give their scopes back)."""
    for source in (ROOT / "checkout").rglob("*.py"):
        if PACKAGE in source.parents:
            continue
        text = source.read_text()
        if re.search(r"\b(Scope|fingerprint)\(", text):
            assert re.search(r"^PIPELINE = |\btwin\(|Pipeline\(", text, re.MULTILINE), source.relative_to(ROOT)


# --- the decorator, in an app of its own ------------------------------------------------------------------------


@pytest.fixture
def notes_app(tmp_path: Path) -> Iterator[Flask]:
    """A reader's app: notes taken once per key, the whole view one transaction."""
    db, once = SQLAlchemy(), Idempotency()
    notes = sa.Table("notes", db.metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("text", sa.Text))
    app = Flask(__name__)
    app.config.update(SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path / 'notes.sqlite3'}", SECRET_KEY="n" * 32)
    db.init_app(app)
    once.init_app(app, db)
    once.create_all(app)

    @app.post("/notes")
    @idempotent(customer=lambda: request.headers.get("User", ""))
    def create_note() -> Any:
        made = db.session.execute(sa.insert(notes).values(text=request.get_json()["text"]))
        return {"id": made.inserted_primary_key[0]}, 201

    @app.get("/notes")
    def list_notes() -> Any:
        return [row.text for row in db.session.execute(sa.select(notes).order_by(notes.c.id))]

    yield app
    with app.app_context():
        db.engine.dispose()


def post_note(client: FlaskClient, key: str | None, text: str = "milk", user: str = "ann") -> Any:
    headers = {"User": user, **({"Idempotency-Key": key} if key is not None else {})}
    return client.post("/notes", json={"text": text}, headers=headers)


def test_a_decorated_view_runs_once_per_key_and_its_answer_is_replayed(notes_app: Flask) -> None:
    client = notes_app.test_client()
    first = post_note(client, "note-key-0000000001")
    again = post_note(client, "note-key-0000000001")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.data == first.data and again.headers["Idempotent-Replayed"] == "true"
    assert client.get("/notes").get_json() == ["milk"]


def test_the_decorator_refuses_a_missing_key_and_another_body_under_a_key(notes_app: Flask) -> None:
    client = notes_app.test_client()
    assert post_note(client, None).status_code == 400
    assert post_note(client, "note-key-0000000002").status_code == 201
    other = post_note(client, "note-key-0000000002", text="bread")
    assert (other.status_code, other.get_json()["type"]) == (422, "idempotency-key-reused")
    assert client.get("/notes").get_json() == ["milk"]


def test_the_same_key_from_another_customer_is_another_operation(notes_app: Flask) -> None:
    client = notes_app.test_client()
    assert post_note(client, "note-key-0000000003", user="ann").status_code == 201
    bobs = post_note(client, "note-key-0000000003", user="bob")
    assert bobs.status_code == 201 and "Idempotent-Replayed" not in bobs.headers
    assert client.get("/notes").get_json() == ["milk", "milk"]


def test_racing_duplicates_of_a_decorated_view_make_one_note(notes_app: Flask) -> None:
    statuses = race(8, lambda _: int(post_note(notes_app.test_client(), "note-key-0000000004").status_code))
    assert 201 in statuses and set(statuses) <= {201, 409}, statuses
    assert notes_app.test_client().get("/notes").get_json() == ["milk"]


def test_no_module_of_the_shop_is_over_450_lines() -> None:
    """What a reader meets: no module of ``checkout/`` longer than 450 lines (split it where its reading order
    breaks: the answers of a payment, a webhook's models, the test cards each have their own)."""
    lengths = {
        str(source.relative_to(ROOT)): len(source.read_text().splitlines())
        for source in (ROOT / "checkout").rglob("*.py")
    }
    assert {name: length for name, length in lengths.items() if length > 450} == {}
