"""The lab: the ledger a workshop watches while it clicks. Off in production."""
from __future__ import annotations

from flask import Blueprint, Response, abort, current_app, jsonify, render_template

from checkout.lab.ledger import counters, ledger

bp = Blueprint("lab", __name__)


@bp.before_request
def _lab_must_be_on() -> None:
    if not current_app.config["CHECKOUT_LAB"]:
        abort(404)


@bp.get("/api/lab/ledger")
def ledger_json() -> Response:
    return jsonify({**ledger(), "counters": counters()})


@bp.get("/lab")
def index() -> str:
    return render_template("lab/index.html", ledger=ledger(), counters=counters())
