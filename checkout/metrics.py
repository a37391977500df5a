"""GET /metrics: the defence, observable once the lab is off (Prometheus text format).

Counters move only on committed audit events (``checkout.idempotency.audit.on_committed``). The multiprocess
setup is in gunicorn.conf.py, not here: prometheus_client reads ``PROMETHEUS_MULTIPROC_DIR`` once, at import.
Design: docs/design.md#checkoutmetricspy-counters-from-the-audit-trail
"""

from __future__ import annotations

import os
import time
from collections import Counter as Counter_
from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from flask import Blueprint, Flask, Response, g, has_app_context, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as prometheus_multiprocess
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Mapped, mapped_column

from checkout.audit import AuditEvent, on_committed
from checkout.database import Base, dialect_insert, table_of
from checkout.extensions import db
from checkout.idempotency import Event, Scope
from checkout.idempotency.signals import purged
from checkout.mail.outbox import OutboxMessage

bp = Blueprint("metrics", __name__)

_ENDPOINT = ["endpoint"]
CLAIMS = Counter("checkout_claims", "Idempotency keys claimed: operations run for the first time.", _ENDPOINT)
REPLAYS = Counter("checkout_replays", "Duplicates answered with the stored response.", _ENDPOINT)
CONFLICTS = Counter("checkout_conflicts", "Duplicates that arrived while the first was still running.", _ENDPOINT)
MISMATCHES = Counter("checkout_mismatches", "Keys that came back with another request (refused).", _ENDPOINT)
RESUMPTIONS = Counter("checkout_resumptions", "Retries that resumed a released operation.", _ENDPOINT)
TAKEOVERS = Counter("checkout_takeovers", "Operations taken over after their holder's lease ran out.", _ENDPOINT)
GATEWAY_FAULTS = Counter("checkout_gateway_faults", "Gateway calls that failed or lost their answer.", ["fault"])
WEBHOOKS_APPLIED = Counter("checkout_webhooks_applied", "Gateway events applied (at most once each).", ["type"])
WEBHOOKS_DUPLICATED = Counter("checkout_webhooks_duplicated", "Gateway events delivered again and ignored.")
LATENCY = Histogram(
    "checkout_latency_seconds",
    "How long a checkout request (a payment or a refund) took to answer.",
    _ENDPOINT,
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

# The endpoints whose latency is the checkout's (route templates, as the engine's scopes name them).
TIMED = {
    "/api/orders": "POST /api/orders",
    "/checkout": "POST /checkout",
    "/api/orders/<order_id>/refunds": "POST /api/orders/<order_id>/refunds",
    "/orders/<order_id>/refunds": "POST /orders/<order_id>/refunds",
    "/api/payments": "POST /api/payments",
}
FAULTS = {"gateway_unavailable": "unavailable", "answer_lost": "answer_lost"}
EMAIL_KINDS = ("order_confirmation", "refund_receipt")


def count_committed(events: Sequence[AuditEvent]) -> None:
    for event in events:
        name, endpoint = event["name"], event["endpoint"]
        if name == Event.CLAIMED:
            CLAIMS.labels(endpoint).inc()
        elif name == Event.REPLAYED:
            REPLAYS.labels(endpoint).inc()
        elif name == Event.CONFLICT:
            CONFLICTS.labels(endpoint).inc()
        elif name == Event.MISMATCH:
            MISMATCHES.labels(endpoint).inc()
        elif name == Event.RESUMED:
            (TAKEOVERS if event["detail"].get("expired_lease") else RESUMPTIONS).labels(endpoint).inc()
        elif name in FAULTS:
            GATEWAY_FAULTS.labels(FAULTS[name]).inc()


def webhook_received(type_: str, result: str) -> None:
    if result == "applied":
        WEBHOOKS_APPLIED.labels(type_).inc()
    elif result == "duplicate":
        WEBHOOKS_DUPLICATED.inc()


class EmailsSent(Collector):
    """Emails sent, counted where they are marked sent: in the outbox table. Whichever process sent
    them (``flask outbox relay --forever``, a process nobody scrapes, or a one-shot run) and
    across restarts, the count is the database's. (A resend after a crash is one message, counted once.)"""

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        if not has_app_context():
            return [family]
        outbox = table_of(OutboxMessage)
        try:
            rows = db.session.execute(
                sa.select(outbox.c.kind, sa.func.count()).where(outbox.c.sent_at.is_not(None)).group_by(outbox.c.kind)
            ).all()
        except OperationalError:  # the database is busy or away: this scrape goes without the family
            db.session.rollback()
            return []
        for kind, sent in {**dict.fromkeys(EMAIL_KINDS, 0), **dict(rows)}.items():
            family.add_metric([kind], sent)
        return [family]

    @staticmethod
    def _family() -> CounterMetricFamily:
        return CounterMetricFamily("checkout_emails_sent", "Outbox messages the mail server accepted.", labels=["kind"])


REGISTRY.register(EmailsSent())


# --- housekeeping: what reconcile and purge did, whichever process ran them ----------------------------------


class HousekeepingCount(Base):
    """Totals of what the housekeeping did, added up in the database: reconcile and purge run as commands (cron)
    or from the lab, in processes nobody scrapes, so a counter in their memory would be lost with them."""

    __tablename__ = "housekeeping_counts"

    job: Mapped[str] = mapped_column(sa.String(32), primary_key=True)  # reconcile, compensate, purge
    outcome: Mapped[str] = mapped_column(sa.String(32), primary_key=True)  # paid, failed, ...; purge: records
    total: Mapped[int] = mapped_column(sa.BigInteger)


# Each job's metric, and the outcomes it shows from the first scrape (at 0 until one happens).
HOUSEKEEPING = {
    "reconcile": ("checkout_reconciled", "Abandoned operations reconcile ended, by outcome.",
                  ("paid", "declined", "failed", "succeeded", "refunded", "waiting", "restarted", "skipped")),
    "compensate": ("checkout_compensations", "Orphan charges of unpaid orders, by what reconcile did with them.",
                   ("compensated", "waiting", "refused")),
    "purge": ("checkout_purged", "Completed idempotency records purged past their lifetime.", ("records",)),
}  # fmt: skip


def count_housekeeping(job: str, outcomes: Iterable[str]) -> None:
    """Add one run's outcomes to ``job``'s totals, in the current unit of work."""
    for outcome, times in Counter_(outcomes).items():
        insert = dialect_insert(HousekeepingCount, db.session).values(job=job, outcome=outcome, total=times)
        db.session.execute(
            insert.on_conflict_do_update(
                index_elements=[HousekeepingCount.job, HousekeepingCount.outcome],
                set_={"total": HousekeepingCount.total + insert.excluded.total},
            )
        )


def _purged(_app: Flask, *, scopes: Sequence[Scope]) -> None:
    count_housekeeping("purge", ["records"] * len(scopes))  # in the unit that deletes them


class Housekeeping(Collector):
    """The housekeeping totals, as counters (read from the database at each scrape, like EmailsSent)."""

    def describe(self) -> Iterable[Metric]:
        return [self._family(job) for job in HOUSEKEEPING]

    def collect(self) -> Iterable[Metric]:
        if not has_app_context():
            return self.describe()
        try:
            rows = db.session.execute(sa.select(HousekeepingCount.job, HousekeepingCount.outcome,
                                                HousekeepingCount.total)).all()  # fmt: skip
        except DBAPIError:  # the database is busy or away, or not migrated yet: this scrape goes without them
            db.session.rollback()
            return []
        families = []
        for job, (_name, _help, outcomes) in HOUSEKEEPING.items():
            family, totals = self._family(job), dict.fromkeys(outcomes, 0)
            totals.update({outcome: total for found, outcome, total in rows if found == job})
            for outcome, total in totals.items():
                family.add_metric([outcome], total)
            families.append(family)
        return families

    @staticmethod
    def _family(job: str) -> CounterMetricFamily:
        name, help_, _outcomes = HOUSEKEEPING[job]
        return CounterMetricFamily(name, help_, labels=["outcome"])


REGISTRY.register(Housekeeping())


def _registry() -> CollectorRegistry:
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        return REGISTRY
    registry = CollectorRegistry()
    # every worker's files, added up (prometheus-client's multiprocess module is not annotated)
    prometheus_multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(EmailsSent())
    registry.register(Housekeeping())
    return registry


@bp.get("/metrics")
def metrics() -> Response:
    return Response(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)


WEBHOOK_TYPES = ("charge.succeeded", "charge.failed", "refund.succeeded")


def _start_known_series_at_zero() -> None:
    """prometheus-client shows a labelled series only once it has a value: give every known one its 0,
    so ``increase()`` sees the first takeover or fault after a restart (from 0, not from nothing)."""
    for endpoint in TIMED.values():
        for series in (CLAIMS, REPLAYS, CONFLICTS, MISMATCHES, RESUMPTIONS, TAKEOVERS, LATENCY):
            series.labels(endpoint)
    for fault in FAULTS.values():
        GATEWAY_FAULTS.labels(fault)
    for type_ in WEBHOOK_TYPES:
        WEBHOOKS_APPLIED.labels(type_)


def register_metrics(app: Flask) -> None:
    on_committed(count_committed)
    purged.connect(_purged, sender=app)
    app.register_blueprint(bp)
    _start_known_series_at_zero()

    @app.before_request
    def _start_clock() -> None:
        g.checkout_started = time.perf_counter()

    @app.teardown_request
    def _time_checkout(_error: BaseException | None) -> None:
        rule = request.url_rule.rule if request.url_rule is not None else None
        started = g.get("checkout_started")
        if request.method == "POST" and rule in TIMED and started is not None:
            LATENCY.labels(TIMED[rule]).observe(time.perf_counter() - started)
