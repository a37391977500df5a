"""``flask --app checkout outbox relay``: one round, ``--forever``, or ``--crash-after-send`` for the workshop."""

from __future__ import annotations

import click

from checkout.database import utcnow
from checkout.forever import run_forever
from checkout.mail.relay import INTERVAL_SECONDS, Round, backlog, die_before_marking, relay_once


def relay(*, forever: bool, crash_after_send: bool, interval: float = INTERVAL_SECONDS) -> None:
    if forever and crash_after_send:
        raise click.UsageError("--crash-after-send sends one message and dies: it cannot run --forever")
    if crash_after_send:
        done = relay_once(limit=1, after_send=die_before_marking)  # returns only if there was nothing to send
        _report(done, quiet=False)
        return
    if not forever:
        _report(relay_once(), quiet=False)
        return
    # A stop request ends a round between two messages, never between a send and its mark: stopping
    # cleanly sends no duplicate.
    run_forever(
        lambda stop: _report(relay_once(stop=stop), quiet=True),
        interval=interval,
        doing="relaying the outbox",
        stopping="after this message",
    )


def _report(done: Round, *, quiet: bool) -> None:
    for outgoing in done.sent:
        click.echo(f"sent {outgoing.message_id} to {outgoing.recipient} ({outgoing.title})")
    for failure in done.failed:
        if failure.retry_at is None:
            then = "refused for good, not tried again"
        else:
            then = f"next try in {max(0, round((failure.retry_at - utcnow()).total_seconds()))} s"
        click.echo(
            f"NOT sent {failure.outgoing.message_id} (attempt {failure.attempts}): {failure.error}; {then}",
            err=True,
        )
    if done.transport_down:
        click.echo(f"{done.transport} is not answering: this round stops here", err=True)
    if done.taken_by_another_relay:
        click.echo(f"{done.taken_by_another_relay} message(s) were claimed by another relay first: it sends them")
    if quiet:
        return
    waiting = backlog()
    refused = f"; {waiting.refused} refused for good (their error is kept)" if waiting.refused else ""
    click.echo(f"sent {len(done.sent)} via {done.transport}; {waiting.unsent} unsent{refused}")
    if waiting.held and waiting.held_until is not None:
        seconds = max(0, round((waiting.held_until - utcnow()).total_seconds()))
        click.echo(
            f"{waiting.held} of them held by a relay (sending it, or waiting after a failed send) for {seconds} s "
            "more: a relay that died keeps its claim until then; run this again after that"
        )
