"""The lab's mailbox (``/lab/mailbox``): what the receiver got, beside what the outbox sent.

Copies are grouped by Message-ID: a second copy is a resend the receiver drops. With SMTP only the outbox is shown.
Design: docs/lab.md#checkoutlabmailboxpy-the-mailbox
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy
from email.parser import BytesHeaderParser
from pathlib import Path

import sqlalchemy as sa
from flask import Blueprint, current_app, render_template
from flask.typing import ResponseReturnValue

from checkout.config import settings
from checkout.database import table_of, utcnow
from checkout.extensions import db
from checkout.lab import lab_only, seats
from checkout.mail.outbox import OutboxMessage
from checkout.mail.relay import message_id
from checkout.mail.transports import maildir_path
from checkout.shop.models import Customer, Order, Refund

bp = lab_only(Blueprint("mailbox", __name__))

SHOWN = 50  # rows per table; the totals count everything


@dataclass(frozen=True)
class Copy:
    """One message file in the Maildir: one copy received."""

    message_id: str
    title: str
    recipient: str
    received_at: datetime


@dataclass(frozen=True)
class Group:
    """Every copy received of one Message-ID."""

    message_id: str
    title: str
    recipient: str
    copies: int
    last_received: datetime

    @property
    def duplicates(self) -> int:
        return self.copies - 1


def received(maildir: Path) -> list[Copy]:
    """Every message delivered into ``maildir`` (new/ and cur/), its headers only."""
    parser = BytesHeaderParser(policy=policy.default)
    copies = []
    for folder in ("new", "cur"):
        try:
            entries = list(os.scandir(maildir / folder))
        except FileNotFoundError:
            continue  # nothing was ever delivered
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_file():
                continue
            try:
                with open(entry.path, "rb") as handle:
                    headers = parser.parse(handle)
                delivered = datetime.fromtimestamp(entry.stat().st_mtime, UTC)
            except FileNotFoundError:
                continue  # a mail client moved it from new/ to cur/ meanwhile
            copies.append(
                Copy(
                    str(headers.get("Message-ID") or f"(no Message-ID: {entry.name})").strip(),
                    str(headers.get("Subject") or ""),
                    str(headers.get("To") or ""),
                    delivered,
                )
            )
    return copies


def by_message_id(copies: list[Copy]) -> list[Group]:
    """The copies grouped by Message-ID, the most recently received first."""
    groups: dict[str, list[Copy]] = {}
    for copy in copies:
        groups.setdefault(copy.message_id, []).append(copy)
    found = [
        Group(key, same[0].title, same[0].recipient, len(same), max(c.received_at for c in same))
        for key, same in groups.items()
    ]
    return sorted(found, key=lambda group: (group.last_received, group.message_id), reverse=True)


@dataclass(frozen=True)
class OutboxRow:
    id: int
    kind: str
    recipient: str
    title: str
    message_id: str
    created_at: datetime
    sent_at: datetime | None
    claimed_until: datetime | None
    attempts: int
    last_error: str | None
    refused_at: datetime | None

    @property
    def state(self) -> str:
        if self.sent_at is not None:
            return "sent"
        if self.refused_at is not None:
            return "refused"  # by the mail server, for good: the relay never tries it again
        if self.claimed_until is not None and self.claimed_until > utcnow():
            return "held"
        return "waiting"


def about_customer(customer: str) -> sa.ColumnElement[bool]:
    """An outbox message is the customer's: it is about one of the customer's orders, or a refund of one."""
    orders = sa.select(Order.id).join(Customer).where(Customer.public_id == customer)
    subject = table_of(OutboxMessage).c.subject
    return sa.or_(
        subject.in_(sa.select(Order.public_id).where(Order.id.in_(orders))),
        subject.in_(sa.select(Refund.public_id).where(Refund.order_id.in_(orders))),
    )


def outbox_rows(customer: str | None = None) -> tuple[list[OutboxRow], dict[str, int]]:
    """The newest outbox messages (everyone's, or one customer's), and how many are sent, refused and waiting."""
    messages = table_of(OutboxMessage)
    whose = about_customer(customer) if customer is not None else sa.true()
    rows = db.session.execute(
        sa.select(
            messages.c.id,
            messages.c.kind,
            messages.c.subject,
            messages.c.recipient,
            messages.c.title,
            messages.c.created_at,
            messages.c.sent_at,
            messages.c.claimed_until,
            messages.c.attempts,
            messages.c.last_error,
            messages.c.refused_at,
        )
        .where(whose)
        .order_by(messages.c.id.desc())
        .limit(SHOWN)
    ).all()
    sent, refused, total = db.session.execute(
        sa.select(
            sa.func.count(messages.c.sent_at),
            sa.func.count(messages.c.refused_at).filter(messages.c.sent_at.is_(None)),
            sa.func.count(),
        )
        .select_from(messages)
        .where(whose)
    ).one()
    found = [
        OutboxRow(
            row.id,
            row.kind,
            row.recipient,
            row.title,
            message_id(row.kind, row.subject),
            row.created_at,
            row.sent_at,
            row.claimed_until,
            row.attempts,
            row.last_error,
            row.refused_at,
        )
        for row in rows
    ]
    return found, {"sent": int(sent), "refused": int(refused), "waiting": int(total) - int(sent) - int(refused)}


@bp.get("/lab/mailbox")
def index() -> ResponseReturnValue:
    smtp_url = settings().smtp_url
    maildir = maildir_path(current_app)
    groups = [] if smtp_url else by_message_id(received(maildir))
    whose = seats.scope()  # a seat's browser: the mail of the seat's orders alone
    rows, counts = outbox_rows(whose)
    if whose is not None:
        messages = table_of(OutboxMessage)
        kinds = db.session.execute(sa.select(messages.c.kind, messages.c.subject).where(about_customer(whose))).all()
        groups = [group for group in groups if group.message_id in {message_id(*row) for row in kinds}]
    return render_template(
        "lab/mailbox.html",
        smtp_url=smtp_url,
        maildir=maildir,
        groups=groups[:SHOWN],
        total_copies=sum(group.copies for group in groups),
        total_messages=len(groups),
        total_duplicates=sum(group.duplicates for group in groups),
        rows=rows,
        counts=counts,
        copies={group.message_id: group.copies for group in groups},
        now=utcnow(),
    )
