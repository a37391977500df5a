"""The outbox relay: every message sent at least once, and received once.

One round reads unsent messages, claims each with a conditional UPDATE, sends it with no
transaction open, and only then marks it sent: at least once, and a resend keeps its Message-ID,
so the receiver keeps one copy.
Design: docs/design.md#checkoutmailrelaypy-the-outbox-relay
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime

import sqlalchemy as sa
from flask import current_app

from checkout.database import assert_idle, reading, table_of, utcnow, writing
from checkout.mail.outbox import OutboxMessage
from checkout.mail.transports import MessageRefused, Transport, transport_for

log = logging.getLogger(__name__)

BATCH = 20  # messages read per round: a round stays short, and a stop request is heard soon
CLAIM_MARGIN_SECONDS = 15.0  # a relay's lease on a message it sends: the longest send its transport allows, and this
MAX_BACKOFF_SECONDS = 300.0
INTERVAL_SECONDS = 2.0  # between rounds of --forever (its --interval)
SHOP_ADDRESS = "Checkout shop <shop@checkout.invalid>"
MESSAGE_ID_DOMAIN = "checkout.invalid"
ERROR_LENGTH = 300  # the last_error column

outbox = table_of(OutboxMessage)
_SAFE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def message_id(kind: str, subject: str) -> str:
    """The Message-ID of the outbox's one message of ``kind`` about ``subject``: the same on every resend."""
    return f"<outbox.{_id_part(kind)}.{_id_part(subject)}@{MESSAGE_ID_DOMAIN}>"


def _id_part(text: str) -> str:
    """``text`` if it may stand in a Message-ID as it is (ids like ``ord_1f3a``), else a digest of it."""
    return text if _SAFE.fullmatch(text) else "h" + hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Outgoing:
    """An outbox row copied out of its read, so nothing holds a transaction while it is sent."""

    id: int
    kind: str
    subject: str
    recipient: str
    title: str
    body: str
    created_at: datetime
    attempts: int = 0

    @property
    def message_id(self) -> str:
        return message_id(self.kind, self.subject)


def build(outgoing: Outgoing) -> EmailMessage:
    """The email, derived from the outbox row and nothing else: a resend is the same message."""
    message = EmailMessage()
    message["From"] = SHOP_ADDRESS
    message["To"] = outgoing.recipient
    message["Subject"] = outgoing.title
    message["Date"] = format_datetime(outgoing.created_at)
    message["Message-ID"] = outgoing.message_id
    message.set_content(outgoing.body, subtype="plain", charset="utf-8")
    return message


def backoff_seconds(attempts: int) -> float:
    """How long a message waits after its ``attempts``-th failed send: 2 s, 4 s, 8 s ... 5 min."""
    return float(min(MAX_BACKOFF_SECONDS, 2.0 ** min(max(attempts, 1), 16)))


def short_error(error: BaseException) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= ERROR_LENGTH else text[: ERROR_LENGTH - 1] + "…"


def _due(limit: int) -> list[Outgoing]:
    """The oldest unsent messages no relay holds, copied out; the read is over when this returns."""
    now = utcnow()
    with reading() as session:
        rows = session.execute(
            sa.select(*(outbox.c[column.name] for column in fields(Outgoing)))
            .where(
                outbox.c.sent_at.is_(None),
                outbox.c.refused_at.is_(None),
                sa.or_(outbox.c.claimed_until.is_(None), outbox.c.claimed_until <= now),
            )
            .order_by(outbox.c.id)
            .limit(limit)
        ).all()
        return [Outgoing(*row) for row in rows]


def _claim(outgoing: Outgoing, seconds: float) -> int | None:
    """Take the message for one send (a compare-and-set): its attempt number, or None if another relay has it.
    Held ``seconds``, longer than the send may take: no other relay sends it while this one still may."""
    now = utcnow()
    with writing() as session:
        attempts = session.execute(
            sa.update(outbox)
            .where(
                outbox.c.id == outgoing.id,
                outbox.c.sent_at.is_(None),
                outbox.c.refused_at.is_(None),
                sa.or_(outbox.c.claimed_until.is_(None), outbox.c.claimed_until <= now),
            )
            .values(claimed_until=now + timedelta(seconds=seconds), attempts=outbox.c.attempts + 1)
            .returning(outbox.c.attempts)
        ).scalar()
    return None if attempts is None else int(attempts)


def _mark_sent(outgoing: Outgoing) -> bool:
    """Sent: the one write after the send. False if it was already marked (another relay, after a lease ran out)."""
    with writing() as session:
        marked = session.execute(
            sa.update(outbox)
            .where(outbox.c.id == outgoing.id, outbox.c.sent_at.is_(None))
            .values(sent_at=utcnow(), claimed_until=None)
            .returning(outbox.c.id)
        ).scalar()
    return marked is not None


def _mark_failed(outgoing: Outgoing, attempts: int, error: str) -> datetime:
    """Not sent: keep the error, and hold the message back until its backoff is over."""
    retry_at = utcnow() + timedelta(seconds=backoff_seconds(attempts))
    with writing() as session:
        session.execute(
            sa.update(outbox)
            .where(outbox.c.id == outgoing.id, outbox.c.sent_at.is_(None))
            .values(last_error=error, claimed_until=retry_at)
        )
    return retry_at


def _mark_refused(outgoing: Outgoing, error: str) -> None:
    """Refused for good: keep the error, release the claim, and let no relay take it again."""
    with writing() as session:
        session.execute(
            sa.update(outbox)
            .where(outbox.c.id == outgoing.id, outbox.c.sent_at.is_(None))
            .values(last_error=error, refused_at=utcnow(), claimed_until=None)
        )


@dataclass(frozen=True)
class Failure:
    outgoing: Outgoing
    attempts: int
    error: str
    retry_at: datetime | None  # None: refused for good, never tried again


@dataclass
class Round:
    """What one round did."""

    transport: str
    sent: list[Outgoing] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)
    taken_by_another_relay: int = 0
    transport_down: bool = False


def relay_once(
    transport: Transport | None = None,
    *,
    limit: int = BATCH,
    after_send: Callable[[Outgoing], None] | None = None,
    stop: threading.Event | None = None,
) -> Round:
    """One round: claim, send, and only then mark, each unsent message of a bounded batch, oldest first.

    Runs inside an app context. ``after_send`` is called between the send and
    the mark (``--crash-after-send`` dies there); ``stop`` ends the round
    between two messages, never between a send and its mark.
    """
    transport = transport or transport_for(current_app)
    done = Round(transport.describe())
    for outgoing in _due(limit):
        if stop is not None and stop.is_set():
            break
        attempts = _claim(outgoing, transport.longest_send_seconds + CLAIM_MARGIN_SECONDS)
        if attempts is None:
            done.taken_by_another_relay += 1
            continue
        assert_idle()  # nothing may wait on the mail server with a transaction open
        try:
            try:
                message = build(outgoing)
            except ValueError as malformed:  # a header no email may carry (a line break in an address)
                raise MessageRefused(f"cannot be built: {malformed}", permanent=True) from malformed
            transport.send(message)
        except MessageRefused as refused:
            error = short_error(refused)
            if refused.permanent:
                _mark_refused(outgoing, error)
                done.failed.append(Failure(outgoing, attempts, error, None))
            else:
                done.failed.append(Failure(outgoing, attempts, error, _mark_failed(outgoing, attempts, error)))
            continue
        except Exception as down:
            error = short_error(down)
            done.failed.append(Failure(outgoing, attempts, error, _mark_failed(outgoing, attempts, error)))
            done.transport_down = True  # the next message would fail the same way: try again next round
            break
        if after_send is not None:
            after_send(outgoing)
        _mark_sent(outgoing)
        done.sent.append(outgoing)
        log.info("sent %s to %s via %s", outgoing.message_id, outgoing.recipient, done.transport)
    return done


@dataclass(frozen=True)
class Backlog:
    """The unsent messages, the ones a relay holds (sending them, or waiting out a failure), and the
    ones the server refused for good (no relay sends them)."""

    unsent: int
    held: int
    held_until: datetime | None  # when the first held message is free again
    refused: int = 0


def backlog() -> Backlog:
    now = utcnow()
    unsent = sa.and_(outbox.c.sent_at.is_(None), outbox.c.refused_at.is_(None))
    held = sa.and_(unsent, outbox.c.claimed_until > now)
    refused = sa.and_(outbox.c.sent_at.is_(None), outbox.c.refused_at.is_not(None))
    with reading() as session:
        count = session.scalar(sa.select(sa.func.count()).select_from(outbox).where(unsent))
        held_count, held_until = session.execute(
            sa.select(sa.func.count(), sa.func.min(outbox.c.claimed_until)).where(held)
        ).one()
        refused_count = session.scalar(sa.select(sa.func.count()).select_from(outbox).where(refused))
        return Backlog(int(count or 0), int(held_count or 0), held_until, int(refused_count or 0))


def die_before_marking(outgoing: Outgoing) -> None:
    """For the workshop (``--crash-after-send``): the message is sent; the relay dies before it marks it.

    ``os._exit`` ends the process at once, as a crash would: no cleanup, no
    commit, nothing more written. The outbox still says unsent.
    """
    print(
        f"sent {outgoing.message_id} to {outgoing.recipient}; dying now, before marking it sent",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    os._exit(1)
