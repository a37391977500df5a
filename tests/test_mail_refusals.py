"""A message the mail server refuses is kept with its error and the round goes on to the next message;
only a server that is down (or closes the connection, 421) ends the round. A permanent refusal (5xx,
an address the server cannot take, a message that cannot be encoded) is not tried again; a temporary
one (4xx) is, after its backoff. On a real SMTP server (aiosmtpd) that does not offer SMTPUTF8."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from flask import Flask

from checkout.config import settings
from checkout.extensions import db
from checkout.mail.outbox import OutboxMessage
from checkout.mail.relay import Round, backlog, relay_once
from tests.helpers import Ledger
from tests.mailing import REFUSED_RECIPIENT, SmtpRecorder, enqueue_message, let_claims_run_out, run_relay
from tests.servers import free_port

INTERNATIONAL = "тест@example.com"
BUSY_RECIPIENT = "busy@example.com"  # 451: try again later
CLOSING_RECIPIENT = "closing@example.com"  # 421: the server closes the connection
SPAM_TITLE = "Your order ord_spam is paid"  # 554 at the end of DATA


class StrictRecorder(SmtpRecorder):
    """A server that refuses some messages for good and some for now, and closes on one."""

    refuse_sender = False

    async def handle_MAIL(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:  # noqa: N802
        if self.refuse_sender:
            return "553 5.7.1 sender not allowed without a login"
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:  # noqa: N802
        if address == BUSY_RECIPIENT:
            return "451 4.3.0 mailbox busy, try again later"
        if address == CLOSING_RECIPIENT:
            return "421 4.3.2 service shutting down"
        return await super().handle_RCPT(server, session, envelope, address, options)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        if SPAM_TITLE.encode() in (envelope.original_content or envelope.content):
            return "554 5.7.1 message refused as spam"
        return await super().handle_DATA(server, session, envelope)


@contextmanager
def server_without_smtputf8(app: Flask) -> Iterator[StrictRecorder]:
    """A real SMTP server on 127.0.0.1 that does not offer SMTPUTF8, and the app sending to it."""
    recorder = StrictRecorder()
    controller = Controller(recorder, hostname="127.0.0.1", port=free_port(), enable_SMTPUTF8=False)
    controller.start()
    settings(app).smtp_url = f"smtp://127.0.0.1:{controller.port}"
    try:
        yield recorder
    finally:
        controller.stop()


def relay_in(app: Flask) -> Round:
    with app.app_context():
        try:
            return relay_once()
        finally:
            db.session.remove()


def by_subject(ledger: Ledger) -> dict[str, OutboxMessage]:
    return {message.subject: message for message in ledger.rows(OutboxMessage)}


def recipients(messages: list[EmailMessage]) -> list[str]:
    return [str(m["To"]) for m in messages]


FIVE = [f"ord_later{n}" for n in range(5)]


def test_an_address_a_server_without_smtputf8_cannot_take_holds_back_no_later_mail(app: Flask, ledger: Ledger) -> None:
    enqueue_message(app, "ord_intl", recipient=INTERNATIONAL)
    for subject in FIVE:
        enqueue_message(app, subject)
    with server_without_smtputf8(app) as server:
        done = relay_in(app)
        assert [o.subject for o in done.sent] == FIVE and not done.transport_down
        assert len(server.wait_for(5)) == 5
    [refused] = done.failed
    assert refused.outgoing.subject == "ord_intl" and refused.retry_at is None  # for good
    row = by_subject(ledger)["ord_intl"]
    assert row.sent_at is None and row.refused_at is not None and "SMTPUTF8" in (row.last_error or "")


@pytest.mark.parametrize("recipient", [INTERNATIONAL, REFUSED_RECIPIENT], ids=["no SMTPUTF8", "550"])
def test_a_message_refused_for_good_is_not_tried_again(app: Flask, ledger: Ledger, recipient: str) -> None:
    enqueue_message(app, "ord_refused", recipient=recipient)
    with server_without_smtputf8(app):
        relay_in(app)
        let_claims_run_out(app)
        again = relay_in(app)
    assert again.sent == [] and again.failed == []
    row = by_subject(ledger)["ord_refused"]
    assert row.attempts == 1 and row.sent_at is None and row.refused_at is not None
    assert row.claimed_until is None  # nothing holds it: it is over
    with app.app_context():
        waiting = backlog()
        db.session.remove()
    assert (waiting.unsent, waiting.refused) == (0, 1)


def test_content_the_server_refuses_with_554_is_kept_for_good_and_the_round_goes_on(app: Flask, ledger: Ledger) -> None:
    enqueue_message(app, "ord_spam")
    enqueue_message(app, "ord_fine")
    with server_without_smtputf8(app) as server:
        done = relay_in(app)
        assert recipients(server.wait_for(1)) == ["shopper@example.com"]
    assert [o.subject for o in done.sent] == ["ord_fine"] and not done.transport_down
    row = by_subject(ledger)["ord_spam"]
    assert row.refused_at is not None and "554" in (row.last_error or "")


def test_a_temporary_refusal_is_tried_again_after_its_backoff(app: Flask, ledger: Ledger) -> None:
    enqueue_message(app, "ord_busy", recipient=BUSY_RECIPIENT)
    enqueue_message(app, "ord_fine")
    with server_without_smtputf8(app):
        done = relay_in(app)
        assert [o.subject for o in done.sent] == ["ord_fine"] and not done.transport_down
        [busy] = done.failed
        assert busy.retry_at is not None  # 4xx: later
        row = by_subject(ledger)["ord_busy"]
        assert row.refused_at is None and "451" in (row.last_error or "")
        assert relay_in(app).failed == []  # it waits out its backoff
        let_claims_run_out(app)
        later = relay_in(app)
    assert [f.outgoing.subject for f in later.failed] == ["ord_busy"]
    assert by_subject(ledger)["ord_busy"].attempts == 2


def test_a_refused_sender_waits_out_a_backoff_and_the_round_goes_on(app: Flask, ledger: Ledger) -> None:
    """The sender is the shop's own, on every message: its refusal is the server's setup, fixed once for all."""
    enqueue_message(app, "ord_a")
    enqueue_message(app, "ord_b")
    with server_without_smtputf8(app) as server:
        server.refuse_sender = True
        done = relay_in(app)
    assert not done.transport_down and [f.outgoing.subject for f in done.failed] == ["ord_a", "ord_b"]
    assert all(f.retry_at is not None for f in done.failed)
    assert all(m.refused_at is None and "553" in (m.last_error or "") for m in ledger.rows(OutboxMessage))


def test_a_server_that_closes_the_connection_with_421_ends_the_round(app: Flask, ledger: Ledger) -> None:
    enqueue_message(app, "ord_closing", recipient=CLOSING_RECIPIENT)
    enqueue_message(app, "ord_next")
    with server_without_smtputf8(app) as server:
        done = relay_in(app)
        assert server.received() == []
    assert done.transport_down and done.sent == []  # the next message would meet a closed server too
    rows = by_subject(ledger)
    assert rows["ord_closing"].refused_at is None and rows["ord_closing"].claimed_until is not None
    assert rows["ord_next"].attempts == 0


def test_the_relay_command_says_a_refused_message_is_not_tried_again(
    app: Flask, ledger: Ledger, database_url: str
) -> None:
    enqueue_message(app, "ord_refused", recipient=REFUSED_RECIPIENT)
    with server_without_smtputf8(app):
        first = run_relay(app, database_url)
        second = run_relay(app, database_url)
    assert first.returncode == 0, first.stderr
    assert "refused for good" in first.stderr and "550" in first.stderr
    assert "sent 0" in second.stdout and "1 refused for good" in second.stdout


def test_the_labs_mailbox_shows_a_refused_message_as_refused_not_waiting(app: Flask, client: Any) -> None:
    enqueue_message(app, "ord_intl", recipient=INTERNATIONAL)
    with server_without_smtputf8(app):
        relay_in(app)
    page = client.get("/lab/mailbox?lang=en").get_data(as_text=True)
    state = page.split('data-testid="outbox-state">', 1)[1].split("</td>", 1)[0]
    assert "refused for good" in state and "waiting" not in state
    assert "<strong>0</strong> waiting, <strong>1</strong> refused for good" in page


def test_a_mail_server_name_that_cannot_be_encoded_is_a_server_down_not_a_refusal(app: Flask, ledger: Ledger) -> None:
    enqueue_message(app, "ord_typo")
    settings(app).smtp_url = "smtp://smtp..example.com:2525"  # a typo in the setting, not in the mail
    done = relay_in(app)
    assert done.transport_down and done.sent == []
    row = by_subject(ledger)["ord_typo"]
    assert row.refused_at is None and row.sent_at is None  # kept for a round once the setting is fixed
