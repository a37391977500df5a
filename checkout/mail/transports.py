"""Where the relay hands a message over: an SMTP server, or a Maildir on this machine.

A transport returns, raises ``MessageRefused`` (this message; permanent or not, as SMTP's
codes say) or raises anything else (the transport is down).
Design: docs/design.md#checkoutmailtransportspy-smtp-or-a-maildir
"""

from __future__ import annotations

import contextlib
import mailbox
import os
import smtplib
import socket
import threading
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from flask import Flask

from checkout.config import settings

# How long one SMTP operation (connect, a command, the data) may take, and how many one send makes at most:
# connect, the greeting, EHLO (then HELO if refused), MAIL, RCPT, DATA, the data, QUIT. The relay claims a
# message for longer than their product (longest_send_seconds), so no other relay sends it meanwhile.
SMTP_TIMEOUT_SECONDS = 5.0
SMTP_OPERATIONS = 9
# The name the relay gives in its EHLO: smtplib would otherwise look up this machine's FQDN, which
# can hang for seconds where DNS is slow.
EHLO_NAME = "checkout.invalid"


CLOSING = 421  # "service not available, closing transmission channel": the server, not this message


class MessageRefused(Exception):
    """The server refused this message (its recipient, its content); other messages may still go.

    ``permanent``: sending it again would be refused again (SMTP's 5xx), so it is not retried.
    """

    def __init__(self, reason: str, *, permanent: bool) -> None:
        super().__init__(reason)
        self.permanent = permanent


class Transport(Protocol):
    def send(self, message: EmailMessage) -> None: ...

    def describe(self) -> str: ...

    @property
    def longest_send_seconds(self) -> float: ...  # what send() allows itself before it gives up


@dataclass(frozen=True)
class SmtpTransport:
    host: str
    port: int
    timeout: float = SMTP_TIMEOUT_SECONDS

    def send(self, message: EmailMessage) -> None:
        smtp = smtplib.SMTP(local_hostname=EHLO_NAME, timeout=self.timeout)
        # smtplib's timeout is per operation (a host with several addresses, a long reply can take more of
        # them): past the longest send, hang up, so the relay's claim always outlasts this send.
        watchdog = threading.Timer(self.longest_send_seconds, _hang_up, args=(smtp,))
        watchdog.start()
        try:
            self._send(smtp, message)
        finally:
            watchdog.cancel()

    def _send(self, smtp: smtplib.SMTP, message: EmailMessage) -> None:
        try:
            smtp.connect(self.host, self.port)
        except UnicodeError as bad_host:  # a host name IDNA cannot encode ("smtp..example"): the setup, not the mail
            raise OSError(f"cannot connect to {self.host!r}: {bad_host}") from bad_host
        try:
            with smtp:
                smtp.send_message(message)
        except smtplib.SMTPNotSupportedError as unsupported:  # a non-ASCII address, and no SMTPUTF8 offered
            raise MessageRefused(str(unsupported), permanent=True) from unsupported
        except smtplib.SMTPRecipientsRefused as refused:
            codes = [code for code, _reply in refused.recipients.values()]
            if CLOSING in codes:
                raise
            raise MessageRefused(str(refused), permanent=all(code >= 500 for code in codes)) from refused
        except smtplib.SMTPSenderRefused as refused:
            if refused.smtp_code == CLOSING:
                raise
            # Every message has the shop's one sender: a refusal of it is most likely the server's setup
            # (a login it wants, a policy), fixed once for all, after which the message must still go.
            raise MessageRefused(str(refused), permanent=False) from refused
        except smtplib.SMTPDataError as refused:
            if refused.smtp_code == CLOSING:
                raise
            raise MessageRefused(str(refused), permanent=refused.smtp_code >= 500) from refused
        except UnicodeError as unencodable:  # a header or address the connection's encoding cannot carry
            raise MessageRefused(f"cannot be encoded: {unencodable}", permanent=True) from unencodable

    def describe(self) -> str:
        return f"smtp://{self.host}:{self.port}"

    @property
    def longest_send_seconds(self) -> float:
        return self.timeout * SMTP_OPERATIONS


def _hang_up(smtp: smtplib.SMTP) -> None:
    """End a send that took too long: a read blocked on the socket returns at once (the server hung up)."""
    connection = smtp.sock
    if connection is not None:  # else done meanwhile, or not connected yet
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)


@dataclass(frozen=True)
class MaildirTransport:
    path: Path

    def send(self, message: EmailMessage) -> None:
        # Maildir makes the folder and its tmp/, new/ and cur/ readable by their owner only (0700), and
        # moves the message into new/ under its key once it is whole. Like the instance folder's other
        # files, the message is then made readable by its owner only.
        key = mailbox.Maildir(os.fspath(self.path), create=True).add(bytes(message))
        with contextlib.suppress(FileNotFoundError):  # a mail client may have moved it to cur/ already
            (self.path / "new" / key).chmod(0o600)

    def describe(self) -> str:
        return f"the Maildir {self.path}"

    @property
    def longest_send_seconds(self) -> float:
        return 1.0  # a file written on a local disk


def maildir_path(app: Flask) -> Path:
    return Path(app.instance_path) / "mail"


def parse_smtp_url(url: str) -> tuple[str, int]:
    """``smtp://host:port`` (port 25 when left out) as (host, port); anything else is refused."""
    parts = urlsplit(url)
    try:
        port = parts.port or 25
    except ValueError:
        port = 0
    if parts.scheme != "smtp" or not parts.hostname or not port or parts.username or parts.path not in ("", "/"):
        raise ValueError(
            f"CHECKOUT_SMTP_URL={url!r} is not valid: use smtp://host:port "
            "(plain SMTP, no login, no TLS), or leave it unset to write mail into the instance folder's Maildir"
        )
    return parts.hostname, port


def transport_for(app: Flask) -> Transport:
    """The transport the app's settings choose: SMTP when ``CHECKOUT_SMTP_URL`` is set, else the Maildir."""
    if url := settings(app).smtp_url:
        host, port = parse_smtp_url(url)
        return SmtpTransport(host, port)
    return MaildirTransport(maildir_path(app))
