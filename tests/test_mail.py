"""The outbox relay: every message sent at least once (a real SMTP server, the Maildir, a relay killed
between sending and marking as a real process), received once (one Message-ID per outbox row), and two
relays at once never send a message twice on purpose."""

from __future__ import annotations

import re
import signal
import threading
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from checkout import create_app
from checkout.config import settings
from checkout.database import utcnow
from checkout.extensions import db
from checkout.mail import relay, transports
from checkout.mail.outbox import OutboxMessage
from checkout.mail.relay import Outgoing, Round, message_id, relay_once
from checkout.mail.transports import SmtpTransport
from tests.helpers import Ledger, race, wait_for
from tests.mailing import (
    REFUSED_RECIPIENT,
    SlowSmtpRecorder,
    enqueue_message,
    let_claims_run_out,
    maildir_files,
    maildir_message_ids,
    python_process,
    run_relay,
    smtp_server,
)
from tests.servers import free_port

CONFIRMATION_ID = "<outbox.order_confirmation.ord_test1@checkout.invalid>"


def relay_in(app: Flask, **options: Any) -> Round:
    """One round of the relay, as the command runs it: in its own app context."""
    with app.app_context():
        try:
            return relay_once(**options)
        finally:
            db.session.remove()


def by_subject(ledger: Ledger) -> dict[str, OutboxMessage]:
    return {message.subject: message for message in ledger.rows(OutboxMessage)}


def mailbox_numbers(client: FlaskClient) -> tuple[list[int], int]:
    """The mailbox page's copies per Message-ID, and its total of duplicates."""
    page = client.get("/lab/mailbox")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    copies = [int(n) for n in re.findall(r'data-testid="mail-copies">(\d+)<', html)]
    [duplicates] = re.findall(r'data-testid="duplicates-total">(\d+)<', html)
    return copies, int(duplicates)


class Recording:
    """A transport that keeps what it is given, and whether a transaction was open at that moment."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[EmailMessage] = []
        self.open_transactions = 0

    def send(self, message: EmailMessage) -> None:
        with self.lock:
            self.messages.append(message)
            self.open_transactions += int(db.session().in_transaction())

    def describe(self) -> str:
        return "a list"

    @property
    def longest_send_seconds(self) -> float:
        return 1.0

    def ids(self) -> list[str]:
        with self.lock:
            return [str(m["Message-ID"]) for m in self.messages]


# --- a real SMTP server --------------------------------------------------------------------------


def test_a_confirmation_reaches_a_real_smtp_server_once_with_the_message_id_of_its_row(
    app: Flask, ledger: Ledger
) -> None:
    enqueue_message(app)
    with smtp_server() as (server, port):
        settings(app).smtp_url = f"smtp://127.0.0.1:{port}"
        done = relay_in(app)
        [received] = server.wait_for(1)
        assert [o.subject for o in done.sent] == ["ord_test1"] and done.transport == f"smtp://127.0.0.1:{port}"
        assert received["Message-ID"] == CONFIRMATION_ID  # derived from the row: (kind, subject)
        assert received["To"] == "shopper@example.com"
        assert received["From"] == relay.SHOP_ADDRESS
        assert received["Subject"] == "Your order ord_test1 is paid"
        assert received["Date"]
        assert received.get_content_type() == "text/plain" and received.get_content_charset() == "utf-8"
        assert received.get_content().replace("\r\n", "\n") == "Thanks for ord_test1.\n"  # SMTP sends CRLF
        [message] = ledger.rows(OutboxMessage)
        assert message.sent_at is not None and message.attempts == 1 and message.claimed_until is None
        again = relay_in(app)  # sent is sent: the next round has nothing to do
        assert again.sent == [] and again.failed == []
        assert len(server.received()) == 1


def test_a_send_that_fails_counts_the_attempt_and_keeps_the_message_for_a_later_round(
    app: Flask, ledger: Ledger
) -> None:
    port = free_port()  # nothing listens there: the mail server is down
    settings(app).smtp_url = f"smtp://127.0.0.1:{port}"
    enqueue_message(app, "ord_a")
    enqueue_message(app, "ord_b")
    down = relay_in(app)
    assert down.sent == [] and down.transport_down  # the round stops at the first failure: b is not tried
    [failure] = down.failed
    assert failure.outgoing.subject == "ord_a" and failure.attempts == 1 and failure.retry_at > utcnow()
    rows = by_subject(ledger)
    assert [(s, m.sent_at, m.attempts) for s, m in sorted(rows.items())] == [("ord_a", None, 1), ("ord_b", None, 0)]
    assert (rows["ord_a"].last_error or "").startswith("ConnectionRefusedError")
    with smtp_server(port) as (server, _):
        back = relay_in(app)  # a waits out its backoff; b goes
        assert [o.subject for o in back.sent] == ["ord_b"]
        let_claims_run_out(app)  # the backoff is over
        later = relay_in(app)
        assert [o.subject for o in later.sent] == ["ord_a"]
        assert sorted(str(m["Message-ID"]) for m in server.wait_for(2)) == [
            "<outbox.order_confirmation.ord_a@checkout.invalid>",
            "<outbox.order_confirmation.ord_b@checkout.invalid>",
        ]
    rows = by_subject(ledger)
    assert all(m.sent_at is not None for m in rows.values())
    assert (rows["ord_a"].attempts, rows["ord_b"].attempts) == (2, 1)


def test_a_message_the_server_refuses_does_not_stop_the_round(app: Flask, ledger: Ledger) -> None:
    enqueue_message(app, "ord_refused", recipient=REFUSED_RECIPIENT)
    enqueue_message(app, "ord_fine")
    with smtp_server() as (server, port):
        settings(app).smtp_url = f"smtp://127.0.0.1:{port}"
        done = relay_in(app)
        assert [o.subject for o in done.sent] == ["ord_fine"] and not done.transport_down
        assert [f.outgoing.subject for f in done.failed] == ["ord_refused"]
        assert [str(m["To"]) for m in server.wait_for(1)] == ["shopper@example.com"]
    rows = by_subject(ledger)
    assert rows["ord_refused"].sent_at is None and "550" in (rows["ord_refused"].last_error or "")


def test_a_message_that_cannot_be_built_is_kept_with_its_error_and_the_round_goes_on(
    app: Flask, ledger: Ledger
) -> None:
    enqueue_message(app, "ord_broken", recipient="a@example.com\nBcc: everyone@example.com")
    enqueue_message(app, "ord_fine")
    done = relay_in(app)
    assert [o.subject for o in done.sent] == ["ord_fine"] and not done.transport_down
    rows = by_subject(ledger)
    assert rows["ord_broken"].sent_at is None and "cannot be built" in (rows["ord_broken"].last_error or "")
    assert maildir_message_ids(app) == ["<outbox.order_confirmation.ord_fine@checkout.invalid>"]


# --- the Maildir, the default --------------------------------------------------------------------


def test_without_an_smtp_url_messages_land_in_the_instance_folders_maildir(app: Flask, ledger: Ledger) -> None:
    assert not settings(app).smtp_url
    enqueue_message(app)
    done = relay_in(app)
    assert done.transport == f"the Maildir {Path(app.instance_path) / 'mail'}"
    [path] = maildir_files(app)
    assert path.parent == Path(app.instance_path) / "mail" / "new"
    assert maildir_message_ids(app) == [CONFIRMATION_ID]
    assert (Path(app.instance_path) / "mail").stat().st_mode & 0o777 == 0o700
    assert path.stat().st_mode & 0o777 == 0o600
    assert ledger.rows(OutboxMessage)[0].sent_at is not None


def test_no_transaction_is_open_while_a_message_is_sent(app: Flask) -> None:
    for n in range(3):
        enqueue_message(app, f"ord_{n}")
    transport = Recording()
    assert len(relay_in(app, transport=transport).sent) == 3
    assert transport.open_transactions == 0


def test_the_message_id_comes_from_the_rows_kind_and_subject_alone() -> None:
    assert message_id("order_confirmation", "ord_1f3a") == "<outbox.order_confirmation.ord_1f3a@checkout.invalid>"
    odd = message_id("refund_receipt", "a b<c>@d")  # anything else is digested, never copied in
    assert re.fullmatch(r"<outbox\.refund_receipt\.h[0-9a-f]{32}@checkout\.invalid>", odd)
    assert odd == message_id("refund_receipt", "a b<c>@d")
    created = utcnow()
    first = relay.build(Outgoing(1, "order_confirmation", "ord_1", "a@example.com", "Paid", "Body\n", created))
    resend = relay.build(Outgoing(1, "order_confirmation", "ord_1", "a@example.com", "Paid", "Body\n", created, 4))
    assert bytes(first) == bytes(resend)  # a resend is the same message, byte for byte


# --- the relay dies between sending and marking --------------------------------------------------


def test_a_relay_killed_between_sending_and_marking_sends_again_with_the_same_message_id(
    app: Flask, client: FlaskClient, database_url: str, ledger: Ledger
) -> None:
    enqueue_message(app)
    crashed = run_relay(app, database_url, "--crash-after-send")
    assert crashed.returncode == 1, crashed.stderr  # os._exit(1): a real crash of the process
    assert "dying now, before marking it sent" in crashed.stderr
    assert maildir_message_ids(app) == [CONFIRMATION_ID]  # received once ...
    [message] = ledger.rows(OutboxMessage)
    assert message.sent_at is None and message.attempts == 1  # ... and still unsent
    assert message.claimed_until is not None and message.claimed_until > utcnow()

    held = run_relay(app, database_url)  # the dead relay's claim holds: no relay sends it on purpose yet
    assert held.returncode == 0, held.stderr
    assert "sent 0" in held.stdout and "held by a relay" in held.stdout
    assert len(maildir_files(app)) == 1

    let_claims_run_out(app)
    again = run_relay(app, database_url)
    assert again.returncode == 0, again.stderr
    assert f"sent {CONFIRMATION_ID}" in again.stdout
    assert maildir_message_ids(app) == [CONFIRMATION_ID, CONFIRMATION_ID]  # received twice, one Message-ID
    first, second = maildir_files(app)
    assert first.read_bytes() == second.read_bytes()  # the same message: the receiver keeps one
    [message] = ledger.rows(OutboxMessage)
    assert message.sent_at is not None and message.attempts == 2  # marked sent once
    assert mailbox_numbers(client) == ([2], 1)

    last = run_relay(app, database_url)
    assert "sent 0" in last.stdout and len(maildir_files(app)) == 2


@pytest.mark.server
def test_relay_forever_sends_and_stops_cleanly_on_sigterm(app: Flask, database_url: str, ledger: Ledger) -> None:
    enqueue_message(app)
    relay_forever = ("-m", "flask", "--app", "checkout", "outbox", "relay", "--forever")
    with python_process(app, database_url, *relay_forever) as process:
        wait_for(lambda: ledger.rows(OutboxMessage, OutboxMessage.sent_at.is_not(None)))
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert f"sent {CONFIRMATION_ID}" in out and out.rstrip().endswith("stopped")
    assert maildir_message_ids(app) == [CONFIRMATION_ID]


# --- two relays at once ----------------------------------------------------------------------------


def test_two_relays_at_once_send_each_message_once(app: Flask, ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    subjects = [f"ord_{n}" for n in range(10)]
    for subject in subjects:
        enqueue_message(app, subject)
    # Both relays read the same batch before either claims anything: only the claim can decide.
    read_together = threading.Barrier(2)
    real_due = relay._due

    def due(limit: int) -> list[Outgoing]:
        batch = real_due(limit)
        read_together.wait(10)
        return batch

    monkeypatch.setattr(relay, "_due", due)
    transport = Recording()
    rounds = race(2, lambda _: relay_in(app, transport=transport))
    assert sorted(transport.ids()) == sorted(message_id("order_confirmation", s) for s in subjects)  # each once
    assert sum(len(r.sent) for r in rounds) == 10
    assert sum(r.taken_by_another_relay for r in rounds) == 10  # each relay saw every message; one took it
    assert all(m.sent_at is not None and m.attempts == 1 for m in ledger.rows(OutboxMessage))


def test_a_relay_holds_a_message_as_long_as_its_slowest_send_may_take(
    app: Flask, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow server (its replies take 0.4 s each): the first relay is still sending, long past a claim of the
    margin alone, and a second relay's round finds the message held, and sends nothing."""
    monkeypatch.setattr(relay, "CLAIM_MARGIN_SECONDS", 0.2)  # shorter than this send: only the send's bound holds it
    enqueue_message(app)
    with smtp_server(recorder=SlowSmtpRecorder(delay=0.4)) as (server, port):
        transport = SmtpTransport("127.0.0.1", port, timeout=1.0)  # one send may take 9 s: the claim holds 9.2
        first: list[Round] = []
        sending = threading.Thread(target=lambda: first.append(relay_in(app, transport=transport)))
        sending.start()
        # At the RCPT, 0.4 s after the MAIL: a claim of the margin alone (0.2 s) would have run out by now.
        assert isinstance(server, SlowSmtpRecorder) and server.at_rcpt.wait(10)
        second = relay_in(app, transport=transport)
        sending.join(30)
        assert len(server.received()) == 1
    assert second.sent == [] and [o.subject for o in first[0].sent] == ["ord_test1"]
    [message] = ledger.rows(OutboxMessage)
    assert message.sent_at is not None and message.attempts == 1


# --- the relay's settings ------------------------------------------------------------------------


def test_a_malformed_smtp_url_stops_the_app_at_start(database_url: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="CHECKOUT_SMTP_URL"):
        create_app(
            {"SQLALCHEMY_DATABASE_URI": database_url, "SECRET_KEY": "k", "CHECKOUT_SMTP_URL": "http://mail:25"},
            instance_path=str(tmp_path / "instance"),
        )


# --- the lab's mailbox -----------------------------------------------------------------------------


class Died(Exception):
    """The relay dying between its send and its mark, in this process."""


def die(outgoing: Outgoing) -> None:
    raise Died(outgoing.message_id)


def test_the_mailbox_groups_the_copies_received_by_message_id_and_counts_the_duplicates(
    app: Flask, client: FlaskClient
) -> None:
    assert mailbox_numbers(client) == ([], 0)
    assert "Nothing received yet." in client.get("/lab/mailbox").get_data(as_text=True)
    enqueue_message(app, "ord_twice")
    enqueue_message(app, "ord_once")
    with pytest.raises(Died):
        relay_in(app, after_send=die, limit=1)
    let_claims_run_out(app)
    relay_in(app)
    copies, duplicates = mailbox_numbers(client)
    assert sorted(copies) == [1, 2] and duplicates == 1
    html = client.get("/lab/mailbox").get_data(as_text=True)
    assert html.count('data-testid="mail-group"') == 2
    assert html.count('data-testid="outbox-row"') == 2
    assert "<outbox.order_confirmation.ord_twice@checkout.invalid>" in html.replace("&lt;", "<").replace("&gt;", ">")


def test_the_mailbox_with_smtp_says_where_the_mail_went_and_shows_only_the_outbox(
    app: Flask, client: FlaskClient
) -> None:
    enqueue_message(app)
    settings(app).smtp_url = "smtp://127.0.0.1:2525"
    html = client.get("/lab/mailbox").get_data(as_text=True)
    assert 'data-testid="smtp-notice"' in html and "smtp://127.0.0.1:2525" in html
    assert 'data-testid="mail-group"' not in html and 'data-testid="duplicates-total"' not in html
    assert html.count('data-testid="outbox-row"') == 1


def test_the_lab_links_to_the_mailbox(client: FlaskClient) -> None:
    assert 'href="/lab/mailbox"' in client.get("/lab").get_data(as_text=True)


@pytest.mark.parametrize("app_overrides", [{"CHECKOUT_LAB": False}])
def test_the_mailbox_is_404_with_the_lab_off(client: FlaskClient) -> None:
    assert client.get("/lab/mailbox").status_code == 404


def test_the_command_is_registered(app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["outbox", "relay", "--help"])
    assert result.exit_code == 0 and "--forever" in result.output and "--crash-after-send" in result.output
    both = app.test_cli_runner().invoke(args=["outbox", "relay", "--forever", "--crash-after-send"])
    assert both.exit_code != 0


def test_a_send_longer_than_its_transport_allows_is_ended_so_the_claim_outlasts_it(
    app: Flask, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """smtplib's timeout is per operation: a watchdog hangs up on a send that passes the whole bound (here one
    operation's worth, 1 s, against a server whose replies take 0.4 s each), and the message waits for a retry."""
    monkeypatch.setattr(transports, "SMTP_OPERATIONS", 1)
    enqueue_message(app)
    with smtp_server(recorder=SlowSmtpRecorder(delay=0.4)) as (_server, port):
        done = relay_in(app, transport=SmtpTransport("127.0.0.1", port, timeout=1.0))
    assert done.sent == [] and done.transport_down
    [message] = ledger.rows(OutboxMessage)
    assert message.sent_at is None and message.attempts == 1
