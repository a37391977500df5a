"""The storage choice, on a real server: idempotency records in Redis (``POST /api/lab/stores/redis/orders``).

The same payment as ``POST /api/orders`` (its phases, its recovery points, its
stored answers), with one thing changed: each key's record lives in Redis,
not in the order's database.

- The claim is one ``SET key value NX PX lifetime``: atomic, and the key
  expires by itself after ``CHECKOUT_KEY_LIFETIME_SECONDS``. The value holds
  the fingerprint, the state, the recovery point, the lease (owner token,
  worker, expiry) and, once completed, the response to replay.
- Every later write is a compare-and-set (a short Lua script): it changes the
  value only if it is still exactly what this worker wrote last. A worker
  whose record was taken over, or forgotten, writes nothing there.

What it costs: Redis is outside the order's transaction. The order is
committed in the database, then its step is written to Redis; a crash in
between, or a Redis that loses keys (a restart without persistence, an
eviction, a FLUSHDB) leaves the order without its record. A retry then claims
the key again, and what still holds is the database: the orders' unique
(customer, idempotency key) hands it the order the key already placed (the
answer for a finished one; for one still pending, the payment goes on under
its own gateway key, which the gateway charges once). One order, one charge;
what is lost is the byte-identical replay and the 409 for a duplicate that
arrives in the gap. And a payment whose client never comes back leaves no
record in the database for reconcile to find: reconcile looks for this
store's pending orders instead (checkout.shop.reconcile), and leaves alone
one whose key a worker holds in Redis (``lease_held``).

Without Redis (``CHECKOUT_REDIS_URL`` unset, or no answer) the route answers
503 and the lab says so.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import hmac
import json
import math
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from functools import partial
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import sqlalchemy as sa
from flask import Flask, current_app

from checkout.database import utcnow
from checkout.extensions import db
from checkout.gateway import Gateway
from checkout.i18n import N_
from checkout.idempotency import (
    COMPLETED,
    FINISHED,
    IN_PROGRESS,
    STARTED,
    Complete,
    Done,
    Event,
    InProgress,
    LeaseLost,
    Mismatch,
    MoveTo,
    Operation,
    Outcome,
    Phase,
    Refuse,
    Refused,
    RetryLater,
    Scope,
    Settings,
    Step,
    StoredResponse,
    Unfinished,
    note,
)
from checkout.idempotency.audit import worker_name
from checkout.lab.api_twins import PlaceLabOrder, path_of
from checkout.shop.models import PENDING, Customer, Order
from checkout.shop.orders import OrderView, by_public_id
from checkout.shop.placement import ORDER_CREATED, OrderRequest, PaymentEvent, find_order, settle
from checkout.shop.reconcile import Reconciled, fence
from checkout.shop.responders import ApiResponder
from checkout.shop.runtime import gateway
from checkout.transactions import assert_idle, reading, writing

REDIS_PATH = "store:redis"
REDIS_ENDPOINT = "POST /api/lab/stores/redis/orders"
PREFIX = "checkout:idempotency:"

# A record in progress usually finishes within seconds: a client should look again soon.
MAX_RETRY_AFTER = 2
ATTEMPTS = 5
POLL_SECONDS = 0.1

# Compare-and-set: write only over exactly the value this worker wrote (or read) last.
_SWAP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return 1
end
return 0
"""
_REMOVE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisEvent(enum.StrEnum):
    """What only this store records in the audit trail."""

    RECORD_LOST = "record_lost"  # the record was gone (or another worker's) when this one wrote its step
    ORDER_FOUND = "order_found"  # a new claim found the key's order still pending, and pays it on


# --- the record ---------------------------------------------------------------------


@dataclass(frozen=True)
class RedisRecord:
    """One key's record, as JSON in one Redis string."""

    customer: str
    endpoint: str
    key: str
    fingerprint: str
    state: str
    recovery_point: str
    owner: str | None
    worker: str | None
    locked_until: float | None  # unix seconds
    reference: str | None
    created_at: float
    response_status: int | None = None
    response_headers: dict[str, str] | None = None
    response_body: str | None = None  # base64

    @property
    def scope(self) -> Scope:
        return Scope(self.customer, self.endpoint, self.key)

    @property
    def completed(self) -> bool:
        return self.state == COMPLETED

    @property
    def response(self) -> StoredResponse | None:
        if self.response_status is None:
            return None
        return StoredResponse(
            self.response_status, dict(self.response_headers or {}), base64.b64decode(self.response_body or "")
        )

    def lease_live(self, now: float) -> bool:
        return self.owner is not None and self.locked_until is not None and self.locked_until > now

    def dumps(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def loads(cls, raw: str) -> RedisRecord:
        return cls(**json.loads(raw))


@dataclass(frozen=True)
class Found:
    """A record as read, with the exact value it was read as (what a compare-and-set compares)."""

    record: RedisRecord
    raw: str
    ttl_seconds: int | None = None


class RedisStore:
    """Idempotency records in Redis, one string per (customer, endpoint, key)."""

    def __init__(self, client: redis.Redis, prefix: str = PREFIX) -> None:
        self.client = client
        self.prefix = prefix
        self._swap = client.register_script(_SWAP)
        self._remove = client.register_script(_REMOVE)

    def name_of(self, scope: Scope) -> str:
        # Customer ids hold no colon, and endpoints are few and known: the name reads back unambiguously.
        return f"{self.prefix}{scope.customer}:{scope.endpoint}:{scope.key}"

    def look(self, scope: Scope) -> Found | None:
        raw = self.client.get(self.name_of(scope))
        return Found(RedisRecord.loads(str(raw)), str(raw)) if raw is not None else None

    def claim(self, record: RedisRecord, lifetime_seconds: float) -> str | None:
        """SET NX with an expiry: the one atomic claim. The value written, or None if the key exists."""
        raw = record.dumps()
        claimed = self.client.set(self.name_of(record.scope), raw, nx=True, px=int(lifetime_seconds * 1000))
        return raw if claimed else None

    def swap(self, expected: str, record: RedisRecord) -> str | None:
        """Replace the value only if it is still ``expected`` (its expiry kept); the new value, or None."""
        raw = record.dumps()
        return raw if self._swap(keys=[self.name_of(record.scope)], args=[expected, raw]) == 1 else None

    def remove(self, expected: str, scope: Scope) -> bool:
        return bool(self._remove(keys=[self.name_of(scope)], args=[expected]))

    def records(self, limit: int = 200) -> list[Found]:
        """Records now in Redis (for the lab), newest first, with their time to live."""
        names = []
        for name in self.client.scan_iter(match=self.prefix + "*", count=500):
            names.append(name)
            if len(names) >= limit:
                break
        if not names:
            return []
        with self.client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.get(name)
                pipe.ttl(name)
            values = pipe.execute()
        found = [
            Found(RedisRecord.loads(raw), raw, ttl if ttl >= 0 else None)
            for raw, ttl in zip(values[::2], values[1::2], strict=True)
            if raw is not None
        ]
        return sorted(found, key=lambda f: f.record.created_at, reverse=True)

    def forget_all(self) -> int:
        """Delete every record of this store (never the rest of the database): Redis losing its keys."""
        removed = 0
        batch: list[str] = []
        for name in self.client.scan_iter(match=self.prefix + "*", count=500):
            batch.append(name)
            if len(batch) >= 500:
                removed += int(self.client.unlink(*batch))
                batch = []
        if batch:
            removed += int(self.client.unlink(*batch))
        return removed


# --- the store of this app, and whether it answers -------------------------------------


class RedisUnavailable(Exception):
    """No Redis is configured, or it does not answer."""


def shown_url(url: str) -> str:
    """The URL without its password, for a page."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def store(app: Flask | None = None) -> RedisStore:
    """This app's Redis store (one connection pool per app); RedisUnavailable if none is configured."""
    app = app or current_app
    url = str(app.config["CHECKOUT_REDIS_URL"])
    if not url:
        raise RedisUnavailable(N_("CHECKOUT_REDIS_URL is not set"))
    found = app.extensions.get("checkout.redis_store")
    if found is None:
        client = redis.Redis.from_url(
            url, decode_responses=True, socket_connect_timeout=0.5, socket_timeout=2.0, health_check_interval=30
        )
        found = app.extensions["checkout.redis_store"] = RedisStore(client)
    assert isinstance(found, RedisStore)
    return found


@dataclass(frozen=True)
class StoreStatus:
    configured: bool
    answering: bool
    url: str  # without its password
    problem: str | None

    @property
    def state(self) -> str:
        return (
            N_("answering") if self.answering else N_("not configured") if not self.configured else N_("not answering")
        )


def status(app: Flask | None = None) -> StoreStatus:
    """Whether the store's Redis answers a PING now."""
    app = app or current_app
    url = str(app.config["CHECKOUT_REDIS_URL"])
    if not url:
        return StoreStatus(False, False, "", N_("CHECKOUT_REDIS_URL is not set"))
    try:
        store(app).client.ping()
    except (redis.RedisError, ValueError) as error:
        return StoreStatus(True, False, shown_url(url), str(error) or type(error).__name__)
    return StoreStatus(True, True, shown_url(url), None)


def lease_held(scope: Scope, app: Flask | None = None) -> bool:
    """Whether a worker holds this key's lease in Redis now: then reconcile leaves its order to it.

    With no Redis configured nobody can hold one. A Redis that does not answer
    cannot say: RedisUnavailable, and reconcile decides nothing.
    """
    try:
        redis_store = store(app)
    except RedisUnavailable:
        return False
    try:
        found = redis_store.look(scope)
    except (redis.RedisError, ValueError) as error:
        raise RedisUnavailable(str(error) or type(error).__name__) from error
    return found is not None and found.record.lease_live(time.time())


# --- the operation: the engine's Operation, its record in Redis -------------------------


class RedisOperation(Operation):
    """The right to run one operation while our value stands in Redis.

    The phases (checkout.shop.placement) work with it as with the engine's
    Operation: ``note``, ``reference``, ``recovery_point``. What differs is
    where a step goes: ``apply`` runs after the phase's transaction has
    committed, and writes the step to Redis with a compare-and-set.
    """

    def __init__(self, redis_store: RedisStore, found: Found, owner: str, *, resumed: bool, settings: Settings) -> None:
        record = found.record
        super().__init__(record.scope, 0, owner, record.recovery_point, resumed=resumed, settings=settings)
        self.store = redis_store
        self.record = record
        self.raw = found.raw
        self.reference = record.reference

    def _write(self, record: RedisRecord) -> None:
        written = self.store.swap(self.raw, record)
        if written is None:
            raise LeaseLost(f"operation {self.scope.key!r}: its record in Redis is gone or someone else's")
        self.record, self.raw = record, written

    def _owned_update(self, **values: Any) -> Any:
        raise TypeError("this operation's record lives in Redis, not in idempotency_records")

    def apply(self, step: Step) -> None:
        """Write the step to Redis (after its transaction committed); LeaseLost if the record is not ours."""
        if isinstance(step, MoveTo):
            self._write(
                replace(
                    self.record,
                    recovery_point=step.recovery_point,
                    reference=self.reference,
                    locked_until=time.time() + self.settings.lease_seconds,
                )
            )
            self.recovery_point = step.recovery_point
        elif isinstance(step, Complete):
            response = step.response
            self._write(
                replace(
                    self.record,
                    state=COMPLETED,
                    recovery_point=FINISHED,
                    reference=self.reference,
                    owner=None,
                    worker=None,
                    locked_until=None,
                    response_status=response.status,
                    response_headers=dict(response.headers),
                    response_body=base64.b64encode(response.body).decode(),
                )
            )
            self.recovery_point = FINISHED
            self.response = response
            with writing(durable=False):
                note(self.scope, Event.COMPLETED, status=response.status, store="redis")
        else:
            raise TypeError(f"a phase must end with MoveTo or Complete, not {step!r}")

    def release(self, reason: str, event: enum.StrEnum | None = None, **detail: Any) -> None:
        """Give the lease back without an outcome, so a retry resumes at once."""
        try:
            self._write(replace(self.record, owner=None, worker=None, locked_until=None, reference=self.reference))
            released = True
        except (LeaseLost, redis.RedisError):
            released = False
        with writing():
            if event:
                note(self.scope, event, **detail)
            if released:
                note(self.scope, Event.RELEASED, reason=reason, recovery_point=self.recovery_point)

    def discard(self, reason: str) -> None:
        """Delete our claim (nothing happened under it), so the key is usable again; like the engine's
        rolled-back claim, it leaves nothing behind, not even an audit event."""
        # If Redis does not answer, the claim expires with its lease; a retry takes it over and starts again.
        with contextlib.suppress(redis.RedisError):
            self.store.remove(self.raw, self.scope)


# --- the engine, on Redis ------------------------------------------------------------------


def _retry_after(record: RedisRecord, now: float) -> int:
    if record.locked_until is None:
        return 1
    return min(MAX_RETRY_AFTER, max(1, math.ceil(record.locked_until - now)))


def _claim(
    redis_store: RedisStore, scope: Scope, fingerprint: str, first: Phase, settings: Settings
) -> RedisOperation | Outcome | None:
    """SET NX the record, then run the first phase in its own transaction; None if another request won."""
    now = time.time()
    owner = secrets.token_hex(16)
    record = RedisRecord(
        customer=scope.customer,
        endpoint=scope.endpoint,
        key=scope.key,
        fingerprint=fingerprint,
        state=IN_PROGRESS,
        recovery_point=STARTED,
        owner=owner,
        worker=worker_name(),
        locked_until=now + settings.lease_seconds,
        reference=None,
        created_at=now,
    )
    raw = redis_store.claim(record, settings.lifetime_seconds)
    if raw is None:
        return None  # the key exists: look at its record
    operation = RedisOperation(redis_store, Found(record, raw), owner, resumed=False, settings=settings)
    try:
        with writing():
            note(scope, Event.RECEIVED)
            note(scope, Event.CLAIMED, owner=owner[:8], store="redis")
            step = first.commit(operation, None)
    except Refuse as refused:
        operation.discard("refused")  # nothing is stored: the key stays usable
        return Refused(refused.response)
    except BaseException:
        operation.discard("error")
        raise
    return _settle(operation, step)


def _take_over(redis_store: RedisStore, found: Found, settings: Settings, *, received: bool) -> RedisOperation | None:
    """Take an expired or released lease with a compare-and-set (None if someone else changed it first)."""
    owner = secrets.token_hex(16)
    record = replace(found.record, owner=owner, worker=worker_name(), locked_until=time.time() + settings.lease_seconds)
    raw = redis_store.swap(found.raw, record)
    if raw is None:
        return None
    with writing(durable=False):
        if received:
            note(record.scope, Event.RECEIVED)
        note(record.scope, Event.RESUMED, recovery_point=record.recovery_point, owner=owner[:8], store="redis")
    return RedisOperation(redis_store, Found(record, raw), owner, resumed=True, settings=settings)


def _answer_existing(
    redis_store: RedisStore, found: Found, fingerprint: str, settings: Settings, *, first_look: bool
) -> RedisOperation | Outcome | None:
    record = found.record
    scope = record.scope
    if not hmac.compare_digest(record.fingerprint, fingerprint):
        with writing(durable=False):
            if first_look:
                note(scope, Event.RECEIVED)
            note(scope, Event.MISMATCH, store="redis")
        return Mismatch()
    response = record.response
    if record.completed and response is not None:
        with writing(durable=False):
            if first_look:
                note(scope, Event.RECEIVED)
            note(scope, Event.REPLAYED, status=response.status, store="redis")
        return Done(response, replayed=True)
    now = time.time()
    if record.lease_live(now):
        retry_after = _retry_after(record, now)
        if first_look:
            with writing(durable=False):
                note(scope, Event.RECEIVED)
                note(scope, Event.CONFLICT, retry_after=retry_after, store="redis")
        return InProgress(retry_after, record.reference)
    return _take_over(redis_store, found, settings, received=first_look)


def _settle(operation: RedisOperation, step: Step) -> RedisOperation | Outcome:
    """Write a committed phase's step to Redis. The database already holds its work, whatever Redis says."""
    try:
        operation.apply(step)
    except LeaseLost:
        with writing(durable=False):
            note(operation.scope, RedisEvent.RECORD_LOST, recovery_point=operation.recovery_point)
        if isinstance(step, Complete):
            return Done(step.response, replayed=False)  # committed: the outcome is true, only its record is gone
        # Like a worker whose lease was taken over: stop. A retry claims again and finds the order.
        return InProgress(retry_after=1, reference=operation.reference)
    if operation.response is not None:
        return Done(operation.response, replayed=False)
    return operation


def _advance(operation: RedisOperation, phases: Mapping[str, Phase]) -> Outcome:
    try:
        while True:
            phase = phases.get(operation.recovery_point)
            if phase is None:
                raise RuntimeError(f"{operation.scope.endpoint}: no phase resumes from {operation.recovery_point!r}")
            value = None
            if phase.call is not None:
                assert_idle()
                value = phase.call(operation)
            with writing():
                step = phase.commit(operation, value)
            settled = _settle(operation, step)
            if not isinstance(settled, RedisOperation):
                return settled
    except RetryLater as later:
        operation.release(later.reason, later.event, **later.detail)
        return Unfinished(later.retry_after, later.reason, operation.reference)
    except BaseException:
        db.session.rollback()
        operation.release("error")
        raise


def _attempt(
    redis_store: RedisStore,
    scope: Scope,
    fingerprint: str,
    phases: Mapping[str, Phase],
    settings: Settings,
    *,
    first_look: bool,
) -> RedisOperation | Outcome:
    for _ in range(ATTEMPTS):
        found = redis_store.look(scope)
        decided = (
            _claim(redis_store, scope, fingerprint, phases[STARTED], settings)
            if found is None
            else _answer_existing(redis_store, found, fingerprint, settings, first_look=first_look)
        )
        if decided is not None:
            return decided
        first_look = False  # another request won a race; its record is there now
    return InProgress(retry_after=1)


def run_on_redis(
    redis_store: RedisStore,
    scope: Scope,
    fingerprint: str,
    phases: Mapping[str, Phase],
    *,
    settings: Settings,
    wait_seconds: float = 0.0,
) -> Outcome:
    """The engine's ``run`` (look, claim, replay, conflict, take over, phases), its records in Redis."""
    outcome = _attempt(redis_store, scope, fingerprint, phases, settings, first_look=True)
    deadline = time.monotonic() + wait_seconds
    pause = threading.Event()
    while isinstance(outcome, InProgress) and time.monotonic() < deadline:
        pause.wait(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        found = redis_store.look(scope)
        if found is None or found.record.completed or not found.record.lease_live(time.time()):
            outcome = _attempt(redis_store, scope, fingerprint, phases, settings, first_look=False)
    if isinstance(outcome, RedisOperation):
        return _advance(outcome, phases)
    return outcome


# --- the payment's phases, where the orders' unique constraint takes over -----------------


def _same_order(order: OrderView, request: OrderRequest) -> bool:
    """Whether a pending order is what this request asks for (its record, and so its fingerprint, is gone)."""
    asked = [(item.sku, item.quantity) for item in request.items]
    placed = [(line.sku, line.quantity) for line in order.items]
    return (order.email, order.card_last4, placed) == (request.email, request.card_number[-4:], asked)


class PlaceRedisOrder(PlaceLabOrder):
    """The payment's phases, plus what a lost record needs.

    A claim after Redis forgot the key (or after a claimant died between its
    transaction and its Redis write) may find the key's order already there.
    A finished one: the phases answer with it, as after a purge. A pending
    one, for the same request: this claim pays it on, under the order's own
    gateway key (the gateway charges that key once, whoever asks). A pending
    one for another request: 409, as the phases answer for an order in progress.
    """

    path = REDIS_PATH

    def create_order(self, operation: Operation, nothing: None) -> Step:
        pending = find_order(self.request.customer_id, self.request.idempotency_key)
        if (
            pending is not None
            and pending.status == PENDING
            and path_of(pending.id) == self.path
            and _same_order(pending, self.request)
        ):
            operation.reference = pending.public_id
            self.order = pending
            operation.note(RedisEvent.ORDER_FOUND, order_id=pending.public_id)
            return MoveTo(ORDER_CREATED)
        return super().create_order(operation, nothing)


def placement(request: OrderRequest) -> PlaceRedisOrder:
    return PlaceRedisOrder(request, ApiResponder(), gateway())


# --- reconcile: pending orders whose record was in Redis (registered with the shop's reconcile) ------


def _unrecorded(settings: Settings) -> list[tuple[Scope, str]]:
    """Pending orders of the Redis store untouched for longer than a lease: their key's scope, their id."""
    quiet_since = utcnow() - timedelta(seconds=settings.lease_seconds)
    rows = db.session.execute(
        sa.select(Customer.public_id, Order.idempotency_key, Order.public_id)
        .join(Customer, Customer.id == Order.customer_id)
        .where(Order.status == PENDING, Order.path == REDIS_PATH, Order.updated_at < quiet_since)
        .order_by(Order.id)
    ).all()
    return [(Scope(customer, REDIS_ENDPOINT, str(key)), public_id) for customer, key, public_id in rows]


def _reconcile_unrecorded(scope: Scope, public_id: str, gateway: Gateway) -> Reconciled:
    """Fence and end one pending order of the Redis store, unless a worker holds its key's lease there."""
    skipped = Reconciled(scope.key, scope.endpoint, scope.customer, "skipped", public_id)
    try:
        if lease_held(scope):
            return skipped  # a retry took it over and is at it: it will finish it
    except RedisUnavailable:
        return skipped  # Redis cannot say whether a worker is at it: decide nothing now
    with reading():  # ends before the gateway is asked
        order = by_public_id(public_id)
    if order is None or order.status != PENDING:
        return skipped  # ended meanwhile (its worker, a retry, the gateway's webhook)
    answer = fence(gateway, order)
    with writing():
        note(scope, PaymentEvent.RECONCILED, order_id=order.public_id, gateway_says=answer.status, store="redis")
        ended = settle(order, answer, partial(note, scope))
    return Reconciled(scope.key, scope.endpoint, scope.customer, ended.status, ended.public_id, ended.charge_id)


def reconcile_redis_store(gateway: Gateway, settings: Settings) -> list[Reconciled]:
    """The Redis store's part of ``flask idempotency reconcile``: its abandoned payments have no record in
    the database for the shop's reconcile to find, only a pending order."""
    with reading():
        unrecorded = _unrecorded(settings)
    return [_reconcile_unrecorded(scope, public_id, gateway) for scope, public_id in unrecorded]
