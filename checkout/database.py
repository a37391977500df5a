"""Database plumbing shared by every layer: the declarative base and the session, and PostgreSQL's bounds on
every wait. The units of work (``writing``, ``reading``, ``assert_idle``), UTC timestamps, "insert unless it
exists" and SQLite's locking setup are the idempotency engine's (checkout/idempotency/units.py), used here as an
app that copied it would use them: a write happens only in ``with writing():``; nothing slow (the gateway) runs
with a transaction open.
Design: docs/design.md#checkoutdatabasepy-sqlite-postgresql-and-their-bounds (each database's setup)
"""

from __future__ import annotations

import os
import secrets
import time
from typing import Any

import sqlalchemy as sa
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine, ExceptionContext
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import DeclarativeBase

from checkout.idempotency.models import BigId, UTCDateTime
from checkout.idempotency.units import (
    WRITE_OPTION,
    TransactionError,
    assert_idle,
    configure_sqlite,
    insert_ignoring_conflicts,
    reading,
    utcnow,
    writing,
)

__all__ = [
    "WRITE_OPTION",
    "Base",
    "BigId",
    "TransactionError",
    "UTCDateTime",
    "assert_idle",
    "db",
    "dialect_insert",
    "insert_ignoring_conflicts",
    "public_id",
    "reading",
    "table_of",
    "utcnow",
    "writing",
]

# Stable constraint names, so Alembic migrations can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


# expire_on_commit=False: after a phase commits we still read the objects we
# wrote; reloading them would silently open a new transaction, which on SQLite
# would hold the lock while the gateway (on its own connection) waits for it.
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})


def table_of(model: type[Base]) -> sa.Table:
    """A model's Table, typed as one (SQLAlchemy types ``__table__`` as a FromClause, which Core's
    ``update``/``delete`` refuse; a declarative model's is always a Table, and this checks it)."""
    table = model.__table__
    if not isinstance(table, sa.Table):
        raise TypeError(f"{model.__name__} is not mapped to a Table")
    return table


def public_id(prefix: str) -> str:
    """Random public ids: nobody can guess or count another customer's orders."""
    return f"{prefix}_{secrets.token_hex(10)}"


def _dialect_name(bind: Any) -> str:
    # ``bind``: an Engine, a Connection, or a (scoped) Session.
    dialect = bind.dialect if hasattr(bind, "dialect") else bind.get_bind().dialect
    return str(dialect.name)


def dialect_insert(table: Any, bind: Any) -> Any:
    """The dialect's own INSERT, for ``ON CONFLICT ... DO UPDATE`` (an upsert)."""
    dialect = _dialect_name(bind)
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"no upsert for {dialect}")


# --- PostgreSQL: every wait is bounded ---------------------------------------------------
# Read when each connection opens (tests make them small). One deployment can change them: the timeouts
# with the URL's options (``?options=-c%20lock_timeout%3D2000``) or PGOPTIONS, which come after ours and
# win; the connection defaults with the URL's own parameters (``?keepalives_idle=10``).

# A statement waits this long for a row or table lock, then fails (LockNotAvailable: a 503). Our units of
# work hold their locks for milliseconds (nothing slow happens inside a transaction), so a longer wait
# means the holder is stuck: a stopped worker, a migration holding a table. (A migration's own ALTER waits
# no longer either: it fails and can be run again, instead of queueing every request behind it.)
LOCK_TIMEOUT_MS = 5_000
# What the 503 of a database that gave up waiting (or is unreachable) tells the client (checkout.errors).
RETRY_AFTER_SECONDS = 5
# A session idle inside a transaction this long is ended by the server, which frees its locks: a worker
# stopped (SIGSTOP, a debugger, a paused VM) in the middle of a unit of work. Nothing idles in a transaction
# on purpose: the gateway, the mail server and every wait for a duplicate happen with none open. One lock
# wait plus one Retry-After: a client that honours it finds the locks freed when it tries again.
IDLE_IN_TRANSACTION_TIMEOUT_MS = LOCK_TIMEOUT_MS + RETRY_AFTER_SECONDS * 1000
# No statement runs longer, whatever it waits on. A request's statements take milliseconds; the longest
# legitimate one is housekeeping: the bench's COPY of a million records takes about 30 s on a 2-CPU VM,
# purge and a migration's index over such a table a few seconds.
STATEMENT_TIMEOUT_MS = 120_000
# libpq's defaults for what the URL does not say: connecting gives up after 10 s, and a peer that vanished
# (a crashed database host, a cut network) is noticed after 30 + 3 x 10 = 60 s of silence instead of the
# operating system's two hours.
CONNECTION_DEFAULTS: dict[str, int] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}


# A pooled connection idle this long is pinged before it is handed out: the database may have restarted since
# (a restart drops every connection; a quiet worker meets it on one that sat idle). A connection in use (a worker
# under load) is not pinged: a ping per checkout cost about 0.7 ms of CPU a payment. A failed ping, or a statement
# on a connection the database dropped (a 503, Retry-After), retires every pooled connection opened before that
# moment, so the client's retry finds a fresh one.
IDLE_PING_SECONDS = 10.0


def configure_engine(engine: Engine) -> None:
    """Make each database safe for several threads, processes and servers: SQLite's BEGIN IMMEDIATE, WAL and busy
    timeout are the engine's (its ``init_app`` sets them up too); on PostgreSQL, every wait bounded."""
    configure_sqlite(engine)
    if engine.dialect.name == "postgresql":
        _configure_postgresql(engine)


def session_options() -> str:
    """The ``-c`` options every PostgreSQL session starts with (the values above, read now)."""
    return (
        f"-c lock_timeout={LOCK_TIMEOUT_MS} -c statement_timeout={STATEMENT_TIMEOUT_MS} "
        f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT_MS}"
    )


def _configure_postgresql(engine: Engine) -> None:
    """Bound every wait on PostgreSQL, in the startup packet (no statement), and keep the values a statement
    carried out of its error's message. A wait that ends is an OperationalError: 503 and Retry-After.
    """

    @event.listens_for(engine, "do_connect")
    def _bounded(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        # The URL's own options (or PGOPTIONS, which libpq reads only when the URL gives none) come last and win.
        given = cparams.get("options") or os.environ.get("PGOPTIONS", "")
        cparams["options"] = f"{session_options()} {given}".strip()
        for name, value in CONNECTION_DEFAULTS.items():
            cparams.setdefault(name, value)

    @event.listens_for(engine, "checkin")
    def _idle_from(_connection: Any, record: Any) -> None:
        record.info["idle_from"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(connection: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get("idle_from", time.monotonic()) < IDLE_PING_SECONDS:
            return
        try:
            engine.dialect.do_ping(connection)
        except engine.dialect.loaded_dbapi.Error as gone:  # a new connection in its place, and none older kept
            raise sa.exc.InvalidatePoolError(f"a pooled connection was closed while idle: {gone}") from gone

    @event.listens_for(engine, "handle_error")
    def _on_error(context: ExceptionContext) -> BaseException | None:
        raised, driver_error = context.sqlalchemy_exception, context.original_exception
        if not isinstance(raised, sa.exc.DBAPIError) or not isinstance(driver_error, engine.dialect.loaded_dbapi.Error):
            return None
        shortened = _first_line_only(driver_error)
        # The server ended the session (idle_in_transaction_session_timeout is SQLSTATE 25P03, which psycopg
        # files as an InternalError by its class): a lost connection like any other, so it is raised as one.
        lost = context.is_disconnect and not isinstance(raised, OperationalError)
        if not shortened and not lost:
            return None
        kind = OperationalError if lost else type(raised)
        # Built again: SQLAlchemy wrote the driver's whole message into its own when it made the first one.
        return kind(
            raised.statement,
            raised.params,
            driver_error,
            hide_parameters=engine.hide_parameters,
            connection_invalidated=context.is_disconnect,
            code=kind.code,
            ismulti=raised.ismulti,
        )


def _first_line_only(error: BaseException) -> bool:
    """Keep only the first line of a PostgreSQL error's message; whether there was more. The DETAIL line repeats
    the row's values (an email) into every log; the first names the constraint; ``error.diag`` keeps the rest.
    """
    if not error.args or not isinstance(error.args[0], str) or "\n" not in error.args[0]:
        return False
    error.args = (error.args[0].split("\n", 1)[0], *error.args[1:])
    return True
