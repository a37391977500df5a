"""What the mail tests share: a real SMTP server that records what it receives, the relay as a real
process, the Maildir read back, and time passing for the relays' claims."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from aiosmtpd.controller import Controller
from flask import Flask

from checkout.config import settings
from checkout.database import utcnow, writing
from checkout.extensions import db
from checkout.mail.outbox import ORDER_CONFIRMATION, OutboxMessage, enqueue
from tests.servers import ROOT, free_port

REFUSED_RECIPIENT = "nobody@example.com"


class SmtpRecorder:
    """An aiosmtpd handler that records every message it accepts (and refuses one recipient)."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.arrived = threading.Condition()

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:  # noqa: N802
        if address == REFUSED_RECIPIENT:
            return "550 5.1.1 no such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        message = BytesParser(policy=policy.default).parsebytes(envelope.original_content or envelope.content)
        assert isinstance(message, EmailMessage)
        with self.arrived:
            self.messages.append(message)
            self.arrived.notify_all()
        return "250 Message accepted for delivery"

    def wait_for(self, count: int, timeout: float = 10) -> list[EmailMessage]:
        """Block until ``count`` messages were received (an event, not a sleep); all of them."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.messages) >= count, timeout), self.messages
            return list(self.messages)

    def received(self) -> list[EmailMessage]:
        with self.arrived:
            return list(self.messages)


class SlowSmtpRecorder(SmtpRecorder):
    """A server that takes ``delay`` seconds over each reply to MAIL, RCPT and DATA (``at_rcpt`` is set when the
    RCPT arrives, a delay after the MAIL, and more after the claim)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay, self.at_rcpt = delay, threading.Event()

    async def handle_MAIL(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:  # noqa: N802
        await asyncio.sleep(self.delay)
        envelope.mail_from = address
        return "250 OK"

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:  # noqa: N802
        self.at_rcpt.set()
        await asyncio.sleep(self.delay)
        return await super().handle_RCPT(server, session, envelope, address, options)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        await asyncio.sleep(self.delay)
        return await super().handle_DATA(server, session, envelope)


@contextmanager
def smtp_server(port: int | None = None, recorder: SmtpRecorder | None = None) -> Iterator[tuple[SmtpRecorder, int]]:
    """A real SMTP server on 127.0.0.1 (aiosmtpd), recording what it receives; its port."""
    recorder = recorder or SmtpRecorder()
    controller = Controller(recorder, hostname="127.0.0.1", port=port or free_port())
    controller.start()
    try:
        yield recorder, int(controller.port)
    finally:
        controller.stop()


def enqueue_message(app: Flask, subject: str = "ord_test1", recipient: str = "shopper@example.com") -> None:
    """What the shop writes when an order is paid: a confirmation in the outbox, in a unit of work."""
    with app.app_context():
        with writing():
            enqueue(ORDER_CONFIRMATION, subject, recipient, f"Your order {subject} is paid", f"Thanks for {subject}.\n")
        db.session.remove()


def let_claims_run_out(app: Flask, seconds: float = 3600) -> None:
    """Let time pass for the outbox: every relay's claim, and every backoff after a failed send, is over."""
    with app.app_context():
        with writing() as session:
            session.execute(
                sa.update(OutboxMessage)
                .where(OutboxMessage.claimed_until.is_not(None))
                .values(claimed_until=utcnow() - timedelta(seconds=seconds))
            )
        db.session.remove()


def maildir_files(app: Flask) -> list[Path]:
    """The message files delivered into the app's Maildir (what a receiver holds), oldest first."""
    folders = [Path(app.instance_path) / "mail" / sub for sub in ("new", "cur")]
    files = [path for folder in folders if folder.is_dir() for path in folder.iterdir() if path.is_file()]
    return sorted(files, key=lambda path: path.stat().st_mtime_ns)


def maildir_message_ids(app: Flask) -> list[str]:
    """Each file's Message-ID, unfolded (a real order's id is long enough to go on a line of its own)."""
    return [
        str(BytesParser(policy=policy.default).parsebytes(path.read_bytes())["Message-ID"]).strip()
        for path in maildir_files(app)
    ]


def relay_environment(app: Flask, database_url: str) -> dict[str, str]:
    """The environment of a relay process working on the test's database and instance folder: it signs
    webhooks with the app's secret and sends them to the app's CHECKOUT_SHOP_URL."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": database_url,
        "CHECKOUT_INSTANCE_PATH": app.instance_path,
        "SECRET_KEY": "test-secret-key",
        "CHECKOUT_SHOP_URL": settings(app).shop_url,
        "CHECKOUT_WEBHOOK_SECRET": settings(app).webhook_secret,
    }
    env["CHECKOUT_AMQP_URL"] = settings(app).amqp_url or "off"
    env["CHECKOUT_AMQP_EXCHANGE"] = settings(app).amqp_exchange
    if settings(app).smtp_url:
        env["CHECKOUT_SMTP_URL"] = settings(app).smtp_url
    return env


def flask_process(
    app: Flask, database_url: str, *arguments: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``flask --app checkout <arguments>`` as a real process, on the test's database and instance folder: for a
    run that dies on purpose (``--crash-...``), or that a test kills."""
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "checkout", *arguments],
        env=relay_environment(app, database_url),
        cwd=app.instance_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextmanager
def python_process(app: Flask, database_url: str, *arguments: str) -> Iterator[subprocess.Popen[str]]:
    """``python <arguments>`` as a process of its own, on the test's database and instance folder, its output piped
    (``communicate`` reads it): killed at the end if it still runs, so a step that failed leaves no process behind."""
    process = subprocess.Popen(
        [sys.executable, *arguments],
        env=relay_environment(app, database_url),
        cwd=app.instance_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with killed_at_the_end(process):
        yield process


@contextmanager
def killed_at_the_end(process: subprocess.Popen[Any]) -> Iterator[None]:
    """Kill ``process`` when the block ends if it still runs, then reap it."""
    try:
        yield
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def flask_here(app: Flask, *arguments: str) -> subprocess.CompletedProcess[str]:
    """The same command in this process, through Flask's CLI runner: for a run that ends by itself (a process of
    its own costs a second of CPU to import the shop). An error it did not expect is raised here."""
    result = app.test_cli_runner().invoke(args=list(arguments))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(arguments), result.exit_code, result.stdout, result.stderr)


def run_relay(app: Flask, database_url: str, *options: str) -> subprocess.CompletedProcess[str]:
    """``flask --app checkout outbox relay``: a process of its own only when it dies on purpose."""
    if any(option.startswith("--crash") for option in options):
        return flask_process(app, database_url, "outbox", "relay", *options)
    return flask_here(app, "outbox", "relay", *options)
