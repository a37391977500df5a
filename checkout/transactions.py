"""Where transactions begin and end: the spine every write goes through.

Reads use the session's ordinary transaction; a write happens only in ``with writing():``, one unit of work that
alone takes SQLite's write lock; nothing slow (the gateway) runs with a transaction open (``assert_idle``).
Design: docs/design.md#checkouttransactionspy-the-units-of-work
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.orm import Session

from checkout.database import WRITE_OPTION
from checkout.extensions import db


class TransactionError(RuntimeError):
    """A write outside a unit of work, or a transaction open where none may be."""


def _session() -> Session:
    """This request's (or this thread's) session: the object behind Flask-SQLAlchemy's scoped proxy."""
    return db.session()


def _end_read(session: Session) -> None:
    if session.new or session.dirty or session.deleted:
        raise TransactionError("objects were changed outside a unit of work; write inside `with writing():`")
    # A read-only transaction: commit and rollback release the same nothing. Commit keeps the
    # objects it loaded usable (expire_on_commit=False); a rollback would expire them.
    session.commit()


@contextmanager
def writing(*, durable: bool = True) -> Iterator[Session]:
    """One unit of work: everything inside commits together, or nothing does.

    ``durable=False`` is for units that only add to the audit trail (a replay,
    a conflict): on PostgreSQL their commit does not wait for the disk
    (``synchronous_commit = off``). A crash may lose the last few such events,
    never a record, an order or a charge; and the wait saved is most of what a
    replay costs.
    """
    session = _session()
    if session.in_transaction():
        _end_read(session)
    connection = session.connection(execution_options={WRITE_OPTION: True})  # BEGIN IMMEDIATE on SQLite
    if not durable and connection.dialect.name == "postgresql":
        session.execute(sa.text("SET LOCAL synchronous_commit TO OFF"))
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise


@contextmanager
def reading() -> Iterator[Session]:
    """A read that must be over before something slow happens (a gateway call follows it).

    Copy what you need into plain values inside the block: the objects it
    loaded are expired when it ends.
    """
    assert_idle()
    session = _session()
    try:
        yield session
    finally:
        session.rollback()


def assert_idle() -> None:
    """No transaction may be open here (before the gateway is called)."""
    if _session().in_transaction():
        raise TransactionError("a transaction is open where none may be (is the gateway being called inside one?)")
