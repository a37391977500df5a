"""The Redis store in the lab: its route (``POST /api/lab/stores/redis/orders``) and its page
(``/lab/stores/redis``): whether Redis answers, the records it holds now, and a button that makes it
forget them all, in the middle of a run if you like. Lab only."""

from __future__ import annotations

from dataclasses import replace

import redis
from flask import Blueprint, Response, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from checkout.errors import problem
from checkout.extensions import csrf, db
from checkout.i18n import _, ngettext
from checkout.lab import damage, lab_only, seats
from checkout.lab.redis_store import (
    PIPELINE,
    REDIS_ENDPOINT,
    REDIS_PATH,
    RedisUnavailable,
    StoreStatus,
    status,
    store,
)
from checkout.shop.api import place_order, token_required
from checkout.shop.forms import EmptyForm

api_bp = lab_only(Blueprint("redis_store_api", __name__))
csrf.exempt(api_bp)  # bearer tokens, like the API
bp = lab_only(Blueprint("redis_store", __name__))

SHOWN = 50


def _unavailable(detail: str, *, retry: bool) -> Response:
    return problem(
        503,
        "Redis unavailable",
        detail,
        type_="redis-unavailable",
        headers={"Retry-After": "2"} if retry else None,
        idempotency_key=request.headers.get("Idempotency-Key"),
    )


@api_bp.post("/api/lab/stores/redis/orders")
@token_required
def create_order() -> Response:
    """POST /api/orders with its idempotency records in Redis: the shop's pipeline, its store swapped."""
    try:
        redis_store = store()
    except RedisUnavailable as missing:
        return _unavailable(f"This route keeps its records in Redis, and {missing}.", retry=False)
    try:
        return place_order(replace(PIPELINE, store=redis_store))
    except redis.RedisError as error:
        db.session.rollback()
        return _unavailable(
            f"Redis did not answer ({error}). Retry with the same Idempotency-Key: the order's unique key "
            "in the database still keeps it to one order and one charge.",
            retry=True,
        )


@bp.app_template_global()
def redis_store_status() -> StoreStatus:
    """For the lab's header: does the Redis store answer now?"""
    return status()


@bp.get("/lab/stores/redis")
def page() -> ResponseReturnValue:
    now = status()
    records = []
    problem_text = now.problem
    if now.answering:
        try:
            records = store().records(SHOWN)
        except redis.RedisError as error:
            problem_text = str(error)
    return render_template(
        "lab/redis_store.html",
        seat=seats.seat_of_this_browser(),
        status=now,
        problem=problem_text,
        records=records,
        endpoint=REDIS_ENDPOINT,
        path=REDIS_PATH,
        damage_row=damage.by_path().get(REDIS_PATH),
        form=EmptyForm(),
    )


@bp.post("/lab/stores/redis/forget")
def forget() -> ResponseReturnValue:
    form = EmptyForm()
    if not form.validate():
        flash(_("The form expired: press the button again."), "error")
        return redirect(url_for("redis_store.page"), 303)
    if seats.seat_of_this_browser() is not None:  # every seat's keys: the teacher's button, not a student's
        flash(_("In a workshop's seat this button is the teacher's: it makes Redis forget every seat's keys."), "error")
        return redirect(url_for("redis_store.page"), 303)
    try:
        removed = store().forget_all()
    except RedisUnavailable as error:  # our own reason, marked for translation where it is raised
        flash(_("Redis did not answer: %(error)s", error=_(str(error))), "error")
    except redis.RedisError as error:  # the client library's words, as they are
        flash(_("Redis did not answer: %(error)s", error=str(error) or type(error).__name__), "error")
    else:
        flash(
            ngettext(
                "Redis forgot %(num)d record of this store. A retry now claims its key again; the orders’ unique "
                "key in the database still finds the order it placed.",
                "Redis forgot %(num)d records of this store. A retry now claims its key again; the orders’ unique "
                "key in the database still finds the order it placed.",
                removed,
            ),
            "success",
        )
    return redirect(url_for("redis_store.page"), 303)
