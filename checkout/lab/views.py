"""The lab: the ledger a workshop watches while it clicks, and its hands-on controls. Off in production.

``/lab`` is the whole page; ``/lab/live`` is its live part, which the page
fetches every few seconds and swaps in place (pausable, the scroll position
kept: no meta refresh).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from babel.numbers import format_decimal
from flask import Blueprint, Response, current_app, flash, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _

from checkout.audit import IdempotencyRecord
from checkout.database import table_of, utcnow, writing
from checkout.extensions import db, once
from checkout.gateway.relay import deliverer, webhook_url
from checkout.i18n import current_language
from checkout.idempotency import RecordView
from checkout.lab import content, controls, damage, lab_only, seats
from checkout.lab.ledger import (
    COUNTER_LABELS,
    COUNTERS,
    counters,
    latest_key_of,
    ledger,
    reason_label,
    refunds_list,
    stock_list,
    timeline,
    totals,
    webhook_list,
)
from checkout.lab.mistakes.catalog import MISTAKES
from checkout.lab.sequence import sequence_svg
from checkout.lab.tables import LabRequest
from checkout.shop import orders, payments
from checkout.shop.forms import EmptyForm
from checkout.shop.identity import browser_identity
from checkout.shop.payment import BROWSER, gateway
from checkout.shop.reconcile import reconcile

bp = lab_only(Blueprint("lab", __name__))

RECENT_PURCHASES = 20
# The page shows the latest rows of each table (a mass run makes hundreds); /api/lab/ledger has up to 200.
ON_THE_PAGE = 20


@bp.get("/api/lab/ledger")
def ledger_json() -> Response:
    """Everyone's rows; a browser that joined a seat, only the seat's (checkout.lab.seats)."""
    whose = seats.scope()
    return jsonify({**ledger(customer=whose), "counters": counters(whose), "totals": totals(whose)})


@bp.get("/api/lab/damage")
def damage_json() -> Response:
    """The damage table as JSON (``?purchase_prefix=`` narrows it to one run's purchases: the mass test)."""
    found = damage.purchases(prefix=request.args.get("purchase_prefix") or None, customer=seats.scope())
    by_path, overall = damage.totals(found)
    return jsonify(
        {
            "totals": overall.to_json(),
            "by_path": {path: total.to_json() for path, total in by_path.items()},
            # Each of the lab's wrong twins on its own (its path's totals, zero until it is used), with its page.
            "mistakes": {
                mistake.name: {
                    **by_path.get(mistake.path, damage.Totals()).to_json(),
                    "path": mistake.path,
                    "page": url_for("mistakes.show", name=mistake.name),
                }
                for mistake in MISTAKES
            },
            "purchases": [purchase.to_json() for purchase in found[:RECENT_PURCHASES]],
        }
    )


def _made(reference: str) -> orders.OrderView | payments.PaymentView | None:
    """What a record's reference names: an order, or one of the articles' payments (its status, for the focus)."""
    if payments.is_payment_id(reference):
        return payments.by_public_id(reference)
    return orders.by_public_id(reference)


def _focus_key() -> tuple[str | None, bool]:
    """The key whose timeline leads the page: ``?key=``, else this browser's latest; and whether it is ours."""
    asked = request.args.get("key", "").strip()
    if asked:
        return asked, False
    return latest_key_of(browser_identity()), True


def _record_of(key: str | None, mine: bool) -> RecordView | None:
    """The record behind the timeline: this browser's own, or (``?key=``) the newest with that key, whoever's
    and on whichever endpoint (the lab shows every record anyway; a seat's lab, only the seat's)."""
    if not key:
        return None
    if mine:
        return once.peek(BROWSER, key, browser_identity())
    records = table_of(IdempotencyRecord)
    query = sa.select(records).where(records.c.key == key)
    if (whose := seats.scope()) is not None:
        query = query.where(records.c.customer == whose)
    found = db.session.execute(query.order_by(records.c.id.desc())).first()
    return once.store.view(found) if found is not None else None


def _live_context() -> dict[str, Any]:
    key, mine = _focus_key()
    record = _record_of(key, mine)
    whose = seats.scope()  # a seat's browser sees the seat's rows alone
    found = damage.purchases(customer=whose)
    by_path, overall = damage.totals(found)
    return {
        "seat": seats.seat_of_this_browser(),
        "ledger": ledger(ON_THE_PAGE, customer=whose),
        "on_the_page": ON_THE_PAGE,
        "counters": counters(whose),
        "counter_meanings": {name: meaning for name, (_event, meaning) in COUNTERS.items()},
        "counter_labels": COUNTER_LABELS,
        "reason_label": reason_label,
        "purchases": found[:RECENT_PURCHASES],
        "damage_by_path": by_path,
        "damage_total": overall,
        "key": key,
        "mine": mine,
        "record": record,
        "protected_paths": damage.PROTECTED_PATHS,
        "holder_pid": controls.holder_pid(record) if record else None,
        "dead_holder": controls.dead_holder(record) if record else None,
        "focus_order": _made(record.reference) if record and record.reference else None,
        # The record's own scope (whose key, on which endpoint); a key whose record is gone: all of its events.
        "timeline": (timeline(key, record.scope.customer, record.scope.endpoint) if record else timeline(key, whose))
        if key
        else [],
        "refunds": refunds_list(customer=whose),
        "stock": stock_list(customer=whose),
        "webhooks": webhook_list(ON_THE_PAGE, customer=whose),
        "form": EmptyForm(),
    }


@bp.get("/lab")
def index() -> ResponseReturnValue:
    return render_template("lab/index.html", guard_on=controls.button_guard_on(), **_live_context())


@bp.get("/lab/live")
def live() -> ResponseReturnValue:
    return render_template("lab/live_parts.html", **_live_context())


@bp.get("/lab/exercises")
def exercises() -> ResponseReturnValue:
    return render_template("lab/exercises.html", exercises=content.exercises())


@bp.post("/lab/button-guard")
def button_guard() -> ResponseReturnValue:
    on = request.form.get("guard") == "on"
    controls.set_button_guard(on)
    flash(
        _("The Pay button guard is on again for this browser.")
        if on
        else _("The Pay button guard is off for this browser: a double click now sends two payments to the server."),
        "info",
    )
    return redirect(url_for("lab.index"), 303)


@bp.post("/lab/kill-worker")
def kill_worker() -> ResponseReturnValue:
    key = request.form.get("key", "")
    record = once.peek(BROWSER, key, browser_identity()) if key else None
    if record is None:
        flash(_("There is no payment with that key in this browser."), "error")
        return redirect(url_for("lab.index"), 303)
    under_gunicorn = request.environ.get("SERVER_SOFTWARE", "").startswith("gunicorn")
    action, message = controls.kill_holder(record, under_gunicorn=under_gunicorn)
    flash(message, "error" if action == "none" else "success")
    response = redirect(url_for("lab.index"), 303)
    if action == "self":
        # This very worker holds the key: it dies once this answer has gone out, as kill -9 would kill it.
        response.call_on_close(controls.kill_this_worker)
    return response


@bp.post("/lab/webhooks/deliver")
def deliver_webhooks() -> ResponseReturnValue:
    done = deliverer(current_app).deliver_due(webhook_url(current_app))
    if done:
        delivered = "; ".join(f"{d.type} {d.event_id[:12]}… → {d.status}" for d in done)
        flash(_("Delivered: %(events)s", events=delivered), "success")
    else:
        flash(_("No gateway event was due: every one is delivered, or waiting for its next attempt."), "info")
    return redirect(url_for("lab.index"), 303)


@bp.post("/lab/webhooks/<event_id>/redeliver")
def redeliver_webhook(event_id: str) -> ResponseReturnValue:
    done = deliverer(current_app).redeliver(event_id, webhook_url(current_app))
    if done is None:
        flash(_("There is no gateway event with that id."), "error")
    else:
        flash(
            _(
                "Delivered %(type)s %(event)s… again: the shop answered %(status)s.",
                type=done.type,
                event=done.event_id[:12],
                status=done.status,
            ),
            "success",
        )
    return redirect(url_for("lab.index"), 303)


@bp.post("/lab/reconcile")
def reconcile_now() -> ResponseReturnValue:
    results = reconcile(gateway())
    done = [r for r in results if r.outcome != "skipped"]
    if done:
        finished = "; ".join(f"{r.order_id or r.key}: {r.outcome}" for r in done)
        flash(_("Reconcile finished: %(payments)s", payments=finished), "success")
    else:
        flash(
            _("Reconcile found nothing abandoned: every payment is finished, or its lease has not run out yet."), "info"
        )
    return redirect(url_for("lab.index"), 303)


@bp.post("/lab/purge-keys")
def purge_keys() -> ResponseReturnValue:
    """Exercise 15: ``idempotency purge`` run as if every key's lifetime had passed. Records in progress are kept
    (reconcile finishes them first), as the purge always keeps them."""
    lifetime = once.settings().lifetime_seconds
    whose = seats.scope()  # a seat purges its own keys, never its neighbours'
    purged = once.store.purge(expired_by=utcnow() + timedelta(seconds=lifetime + 1), customer=whose)
    with writing():
        logged = sa.delete(LabRequest)  # and the lab's log of the requests under those keys
        db.session.execute(logged if whose is None else logged.where(LabRequest.customer == whose))
    flash(
        _(
            "Purged %(count)s completed keys, as if their lifetime had run out: their records, stored answers and "
            "fingerprints are gone; their orders are not.",
            count=purged,
        ),
        "success",
    )
    return redirect(url_for("lab.index"), 303)


@bp.get("/lab/concepts")
def concepts() -> ResponseReturnValue:
    return render_template("lab/concepts.html", concepts=content.concepts())


# A paragraph or list item of a content file (content/), rendered: `code`, links, emphasis; never raw HTML.
bp.add_app_template_filter(content.inline, "md")
bp.add_app_template_global(sequence_svg, "sequence_svg")
bp.add_app_template_filter(content.for_this_shop, "for_this_shop")  # commands shown in <pre>
bp.add_app_template_test(payments.is_payment_id, "payment_id")  # {% if reference is payment_id %}


@bp.app_template_filter("ago")
def ago(value: datetime | str | None) -> str:
    """ "12 s ago" (or "in 12 s"): times a workshop reads at a glance, in the page's language."""
    if value is None:
        return ""
    seconds = (utcnow() - _moment(value)).total_seconds()
    if seconds < 0:
        return str(_("in %(time)s", time=_span(-seconds)))
    return str(_("%(time)s ago", time=_span(seconds)))


@bp.app_template_filter("left")
def left(value: datetime | str | None) -> str:
    """ "12 s": how long until ``value`` (a lease's or a claim's end)."""
    return "" if value is None else _span(max(0.0, (_moment(value) - utcnow()).total_seconds()))


def _moment(value: datetime | str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else value


def _span(seconds: float) -> str:
    if seconds < 60:
        return str(_("%(n)d s", n=int(seconds)))
    if seconds < 3600:
        return str(_("%(n)d min", n=int(seconds // 60)))
    if seconds < 86400:
        return str(_("%(n)d h", n=int(seconds // 3600)))
    return str(_("%(n)d d", n=int(seconds // 86400)))


@bp.app_template_filter("gap")
def gap(seconds: float) -> str:
    """The time between two steps of a timeline, in the page's language: "+0.004 s", "+2.1 s" ("+0,004 с")."""
    shown = 0 if seconds < 0.001 else round(seconds, 3 if seconds < 1 else 1)
    return str(_("+%(seconds)s s", seconds=format_decimal(shown, format="0.###", locale=current_language())))
