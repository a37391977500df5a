"""Writing to the outbox: inside the unit of work that makes the message true.

A message is unique on (kind, subject): whoever writes it first (the worker
finishing a payment, or the gateway's webhook) writes it; the other changes
nothing. The relay (checkout.mail.relay) sends it later, at least once.
"""

from __future__ import annotations

from checkout.database import insert_ignoring_conflicts, utcnow
from checkout.extensions import db
from checkout.mail.models import OutboxMessage


def enqueue(kind: str, subject: str, recipient: str, title: str, body: str) -> None:
    """Add a message to the current unit of work, unless this (kind, subject) already has one."""
    db.session.execute(
        insert_ignoring_conflicts(OutboxMessage, db.session),
        {
            "kind": kind,
            "subject": subject,
            "recipient": recipient,
            "title": title,
            "body": body,
            "created_at": utcnow(),
            "attempts": 0,
        },
    )
