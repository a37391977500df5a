"""The lab: the ledger a workshop watches while it clicks. Off in production."""

from __future__ import annotations

import re
from datetime import datetime

from flask import Blueprint, Response, jsonify, render_template, request
from markupsafe import Markup, escape

from checkout.database import utcnow
from checkout.lab import lab_only
from checkout.lab.concepts import CONCEPTS, PAGES
from checkout.lab.exercises import EXERCISES
from checkout.lab.ledger import counters, damage, ledger, timeline, totals

bp = lab_only(Blueprint("lab", __name__))


@bp.get("/api/lab/ledger")
def ledger_json() -> Response:
    return jsonify({**ledger(), "counters": counters(), "totals": totals()})


@bp.get("/lab")
def index() -> str:
    key = request.args.get("key", "").strip()
    return render_template(
        "lab/index.html",
        ledger=ledger(),
        counters=counters(),
        damage=damage(),
        key=key,
        timeline=timeline(key) if key else [],
    )


@bp.get("/lab/exercises")
def exercises() -> str:
    return render_template("lab/exercises.html", exercises=EXERCISES)


@bp.get("/lab/concepts")
def concepts() -> str:
    return render_template(
        "lab/concepts.html",
        concepts=CONCEPTS,
        pages=PAGES,
        exercises={exercise.slug: exercise for exercise in EXERCISES},
    )


_TICKED = re.compile(r"`([^`]+)`")


@bp.app_template_filter("ticks")
def ticks(text: str) -> Markup:
    """Plain text, escaped, with `name` shown as <code>name</code> (how checkout.lab.concepts marks code)."""
    return Markup(_TICKED.sub(r"<code>\1</code>", str(escape(text))))


@bp.app_template_filter("ago")
def ago(value: datetime | str | None) -> str:
    """ "12 s ago": times a workshop reads at a glance."""
    if value is None:
        return ""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    seconds = (utcnow() - value).total_seconds()
    if seconds < 0:
        return f"in {int(-seconds)} s"
    if seconds < 60:
        return f"{int(seconds)} s ago"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} d ago"
