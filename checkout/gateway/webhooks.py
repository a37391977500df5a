"""Delivering the gateway's events to the merchant: at least once, signed, with backoff.

Due events are POSTed until the merchant answers 2xx. Like a real provider, it promises neither order (a batch goes
out shuffled) nor once (``duplicate_rate`` sends some twice on purpose): the merchant must apply each event once.
Design: docs/design.md#checkoutgatewaywebhookspy-and-checkoutgatewayrelaypy-delivering-the-gateways-events
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from checkout.database import WRITE_OPTION, utcnow
from checkout.gateway.models import GatewayEvent
from checkout.gateway.signing import HEADER, sign

CLAIM_SECONDS = 30  # a deliverer that dies mid-delivery lets another take the event after this
MAX_BACKOFF_SECONDS = 60


@dataclass(frozen=True)
class Delivery:
    event_id: str
    type: str
    status: int | None  # None: no answer at all
    duplicate: bool = False  # a second delivery of a delivered event, on purpose

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def body_of(event: GatewayEvent) -> bytes:
    return json.dumps(
        {"id": event.id, "type": event.type, "created": event.created, "data": event.data},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


class Deliverer:
    def __init__(
        self,
        engine: Engine,
        *,
        secret: str,
        duplicate_rate: float = 0.0,
        rng: random.Random | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self.secret = secret
        self.duplicate_rate = duplicate_rate
        self.rng = rng or random.Random()
        self.timeout = timeout

    def deliver_due(self, url: str, limit: int = 20) -> list[Delivery]:
        """Deliver the events that are due (never delivered, their next attempt come), in no promised order."""
        deliveries: list[Delivery] = []
        events = self._claim_due(limit)
        self.rng.shuffle(events)
        for event in events:
            status = self._post(url, event)
            self._record(event.id, status)
            deliveries.append(Delivery(event.id, event.type, status))
            if status is not None and 200 <= status < 300 and self.rng.random() < self.duplicate_rate:
                deliveries.append(Delivery(event.id, event.type, self._post(url, event), duplicate=True))
        return deliveries

    def redeliver(self, event_id: str, url: str) -> Delivery | None:
        """Send one event again, whatever its state (the lab's button; a provider's "resend")."""
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            event = session.get(GatewayEvent, event_id)
        if event is None:
            return None
        status = self._post(url, event)
        if status is not None and 200 <= status < 300:
            self._record(event.id, status)
        return Delivery(event.id, event.type, status, duplicate=True)

    # -- internals -------------------------------------------------------------

    def _claim_due(self, limit: int) -> list[GatewayEvent]:
        now = utcnow()
        with Session(self._writer, expire_on_commit=False) as session, session.begin():
            due = session.scalars(
                sa.select(GatewayEvent)
                .where(
                    GatewayEvent.delivered_at.is_(None),
                    GatewayEvent.next_attempt_at <= now,
                    sa.or_(GatewayEvent.locked_until.is_(None), GatewayEvent.locked_until < now),
                )
                .order_by(GatewayEvent.created, GatewayEvent.id)
                .limit(limit)
            ).all()
            if due:
                session.execute(
                    sa.update(GatewayEvent)
                    .where(GatewayEvent.id.in_([event.id for event in due]))
                    .values(locked_until=now + timedelta(seconds=CLAIM_SECONDS))
                )
            return list(due)

    def _post(self, url: str, event: GatewayEvent) -> int | None:
        body = body_of(event)
        timestamp = int(utcnow().timestamp())
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", HEADER: sign(self.secret, timestamp, body)},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            with error:
                return int(error.code)
        except (urllib.error.URLError, OSError):
            return None

    def _record(self, event_id: str, status: int | None) -> None:
        now = utcnow()
        with Session(self._writer) as session, session.begin():
            event = session.get(GatewayEvent, event_id)
            if event is None:
                return
            values: dict[str, Any] = {"last_status": status, "locked_until": None, "attempts": event.attempts + 1}
            if status is not None and 200 <= status < 300:
                values["delivered_at"] = event.delivered_at or now
            else:
                backoff = min(MAX_BACKOFF_SECONDS, 2 ** min(event.attempts, 6))
                values["next_attempt_at"] = now + timedelta(seconds=backoff)
            session.execute(sa.update(GatewayEvent).where(GatewayEvent.id == event_id).values(**values))
