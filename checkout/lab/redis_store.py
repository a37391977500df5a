"""The storage choice, on a real server: idempotency records in Redis (``POST /api/lab/stores/redis/orders``).

Redis is outside the order's transaction: a lost record costs the byte-identical replay (and the 409 for a duplicate
in the gap), never a second order or charge: the database's unique constraints still hold. Without Redis: 503.
Design: docs/design.md#checkoutlabredis_storepy-idempotency-records-in-redis
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import islice
from urllib.parse import urlsplit, urlunsplit

import redis
import sqlalchemy as sa
from flask import Flask, current_app

from checkout.audit import note
from checkout.config import settings
from checkout.database import reading, utcnow, writing
from checkout.extensions import db
from checkout.gateway import Gateway
from checkout.i18n import N_
from checkout.idempotency import STARTED, Complete, LeaseLost, MoveTo, RecordView, Scope, Settings, StoredResponse
from checkout.idempotency.store import Held, worker_name
from checkout.idempotency.types import COMPLETED, FINISHED, IN_PROGRESS
from checkout.lab.tables import LabOrder, variant
from checkout.shop.models import PENDING, Customer, Order
from checkout.shop.orders import by_public_id
from checkout.shop.payment import SAFE, PaymentEvent, settle
from checkout.shop.reconcile import Reconciled, fence

REDIS_PATH = "store:redis"
REDIS_ENDPOINT = "POST /api/lab/stores/redis/orders"
# The shop's pipeline with its store swapped: the route hands it this app's RedisStore (checkout/lab/stores.py).
PIPELINE = variant(SAFE, REDIS_PATH, endpoint=REDIS_ENDPOINT)
PREFIX = "checkout:idempotency:"

# Beside each record, under its own prefix: the requests that arrived while its lease was live.
DUPLICATES_PREFIX = "checkout:duplicates:"

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
    updated_at: float = 0.0
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

    def view(self, raw: str, duplicates: int) -> RecordView:
        """The engine's read model; its id is the exact value read, which a compare-and-set compares."""
        now = time.time()
        live = self.lease_live(now)
        return RecordView(
            id=raw,
            scope=self.scope,
            fingerprint=self.fingerprint,
            state=self.state,
            recovery_point=self.recovery_point,
            lease_live=live,
            lease_holder=self.worker if live else None,
            locked_until=_instant(self.locked_until),
            reference=self.reference,
            response=self.response,
            duplicates=duplicates,
            created_at=_instant(self.created_at) or utcnow(),
            updated_at=_instant(self.updated_at or self.created_at) or utcnow(),
        )


def _instant(seconds: float | None) -> datetime | None:
    """Unix seconds as the aware UTC datetimes the engine compares with utcnow()."""
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


@dataclass(frozen=True)
class Found:
    """A record as read, with the exact value it was read as (what a compare-and-set compares)."""

    record: RedisRecord
    raw: str
    ttl_seconds: int | None = None


class RedisStore:
    """Idempotency records in Redis, one string per (customer, endpoint, key): the engine's port.

    Its duplicates counter lives beside the record (``...:duplicates``), so
    counting one never changes the value its owner's next compare-and-set expects.
    """

    name = "redis"
    joins_transaction = False  # the phase's transaction commits in the database first, then its step here

    def __init__(self, client: redis.Redis, prefix: str = PREFIX) -> None:
        self.client = client
        self.prefix = prefix
        self._swap = client.register_script(_SWAP)
        self._remove = client.register_script(_REMOVE)

    def name_of(self, scope: Scope) -> str:
        # Customer ids hold no colon, and endpoints are few and known: the name reads back unambiguously.
        return f"{self.prefix}{scope.customer}:{scope.endpoint}:{scope.key}"

    def counter_of(self, name: str) -> str:
        return DUPLICATES_PREFIX + name[len(self.prefix) :]

    def look(self, scope: Scope) -> Found | None:
        raw = self.client.get(self.name_of(scope))
        return Found(RedisRecord.loads(str(raw)), str(raw)) if raw is not None else None

    # --- the port (checkout.idempotency.store.RecordStore) ---------------------------------

    def find(self, scope: Scope) -> RecordView | None:
        name = self.name_of(scope)
        raw, duplicates = self.client.mget(name, self.counter_of(name))
        return RedisRecord.loads(str(raw)).view(str(raw), int(duplicates or 0)) if raw is not None else None

    def claim(self, scope: Scope, fingerprint: str, owner: str, settings: Settings) -> Held | None:
        # SET NX with an expiry: the one atomic claim; the key expires by itself after its lifetime.
        now = time.time()
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
            updated_at=now,
        )
        raw = record.dumps()
        if not self.client.set(self.name_of(scope), raw, nx=True, px=int(settings.lifetime_seconds * 1000)):
            return None
        self.client.delete(self.counter_of(self.name_of(scope)))  # a count left by a record that expired
        return Held(self.name_of(scope), owner, STARTED, version=raw)

    def take_over(self, record: RecordView, owner: str, settings: Settings) -> Held | None:
        old = RedisRecord.loads(str(record.id))
        now = time.time()
        new = replace(old, owner=owner, worker=worker_name(), locked_until=now + settings.lease_seconds, updated_at=now)
        raw = self._write(str(record.id), new)
        return Held(self.name_of(old.scope), owner, old.recovery_point, old.reference, raw) if raw else None

    def save_step(self, held: Held, step: MoveTo | Complete, settings: Settings) -> int:
        mine = RedisRecord.loads(str(held.version))
        now = time.time()
        if isinstance(step, MoveTo):
            new = replace(
                mine,
                recovery_point=step.recovery_point,
                reference=held.reference,
                locked_until=now + settings.lease_seconds,
                updated_at=now,
            )
        else:
            new = replace(
                mine,
                state=COMPLETED,
                recovery_point=FINISHED,
                reference=held.reference,
                owner=None,
                worker=None,
                locked_until=None,
                updated_at=now,
                response_status=step.response.status,
                response_headers=dict(step.response.headers),
                response_body=base64.b64encode(step.response.body).decode(),
            )
        raw = self._write(str(held.version), new)
        if raw is None:
            raise LeaseLost(f"operation {mine.key!r}: its record in Redis is gone or someone else's")
        held.version = raw
        return int(self.client.get(self.counter_of(str(held.id))) or 0)

    def release(self, held: Held) -> bool:
        mine = RedisRecord.loads(str(held.version))
        raw = self._write(
            str(held.version), replace(mine, owner=None, worker=None, locked_until=None, reference=held.reference)
        )
        if raw is not None:
            held.version = raw
        return raw is not None

    def discard(self, held: Held) -> bool:
        # Like the SQL store's rolled-back claim, it leaves nothing behind. If Redis does not answer,
        # the claim expires with its lease; a retry takes it over and starts again.
        try:
            return bool(self._remove(keys=[str(held.id)], args=[str(held.version)]))
        except redis.RedisError:
            return False

    def count_duplicate(self, record: RecordView) -> None:
        name = self.counter_of(self.name_of(record.scope))
        with self.client.pipeline(transaction=True) as pipe:
            pipe.incr(name)
            pipe.expire(name, 24 * 3600)
            pipe.execute()

    def _write(self, expected: str, record: RedisRecord) -> str | None:
        """Compare-and-set: replace the value only if it is still ``expected`` (its expiry kept)."""
        raw = record.dumps()
        return raw if self._swap(keys=[self.name_of(record.scope)], args=[expected, raw]) == 1 else None

    # --- the lab's page ------------------------------------------------------------------------

    def records(self, limit: int = 200) -> list[Found]:
        """Records now in Redis (for the lab), newest first, with their time to live."""
        names = list(islice(self.client.scan_iter(match=self.prefix + "*", count=500), limit))
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
        names = self.client.scan_iter(match=self.prefix + "*", count=500)
        while batch := list(islice(names, 500)):
            removed += int(self.client.unlink(*batch))
        counters = list(self.client.scan_iter(match=DUPLICATES_PREFIX + "*", count=500))
        if counters:
            self.client.unlink(*counters)  # their counts go with them
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
    url = settings(app).redis_url
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
    url = settings(app).redis_url
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


# --- reconcile: pending orders whose record was in Redis (registered with the shop's reconcile) ------


def _unrecorded(settings: Settings) -> list[tuple[Scope, str]]:
    """Pending orders of the Redis store untouched for longer than a lease: their key's scope, their id."""
    quiet_since = utcnow() - timedelta(seconds=settings.lease_seconds)
    rows = db.session.execute(
        sa.select(Customer.public_id, Order.idempotency_key, Order.public_id)
        .join(Customer, Customer.id == Order.customer_id)
        .join(LabOrder, LabOrder.order_id == Order.id)
        .where(Order.status == PENDING, LabOrder.path == REDIS_PATH, Order.updated_at < quiet_since)
        .order_by(Order.id)
    ).all()
    return [(PIPELINE.scope_of(customer, REDIS_ENDPOINT, str(key)), public_id) for customer, key, public_id in rows]


def _reconcile_unrecorded(scope: Scope, public_id: str, gateway: Gateway) -> Reconciled:
    """Fence and end one pending order of the Redis store, unless a worker holds its key's lease there."""
    skipped = Reconciled.of(scope, "skipped", public_id)
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
    return Reconciled.of(scope, ended.status, ended.public_id, ended.charge_id)


def reconcile_redis_store(gateway: Gateway, settings: Settings) -> list[Reconciled]:
    """The Redis store's part of ``flask idempotency reconcile``: its abandoned payments have no record in
    the database for the shop's reconcile to find, only a pending order."""
    with reading():
        unrecorded = _unrecorded(settings)
    return [_reconcile_unrecorded(scope, public_id, gateway) for scope, public_id in unrecorded]
