"""Database plumbing shared by every layer: the declarative base and the session, UTC timestamps, portable
"insert unless it exists", SQLite's locking setup, PostgreSQL's bounds on every wait, and the units of work.

Reads use the session's ordinary transaction; a write happens only in ``with writing():``, one unit of work that
alone takes SQLite's write lock; nothing slow (the gateway) runs with a transaction open (``assert_idle``).
Nothing here knows about orders, payments or idempotency.
Design: docs/design.md#checkoutdatabasepy-the-units-of-work
Design: docs/design.md#checkoutdatabasepy-sqlite-postgresql-and-their-bounds (each database's setup)
"""

from __future__ import annotations

import functools
import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine, ExceptionContext
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import DeclarativeBase, Session

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


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """An aware UTC datetime on every backend.

    SQLite keeps no time zone, so values come back naive; they were written
    as UTC, so they are read as UTC.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime; use checkout.database.utcnow()")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


def _dialect_name(bind: Any) -> str:
    # ``bind``: an Engine, a Connection, or a (scoped) Session.
    dialect = bind.dialect if hasattr(bind, "dialect") else bind.get_bind().dialect
    return str(dialect.name)


@functools.cache
def _insert_or_ignore(table: sa.Table, dialect: str, returning: tuple[Any, ...]) -> Any:
    statement: Any
    if dialect == "postgresql":
        statement = postgresql.insert(table).on_conflict_do_nothing()
    elif dialect == "sqlite":
        statement = sqlite.insert(table).on_conflict_do_nothing()
    else:
        raise NotImplementedError(f"no atomic insert-or-ignore for {dialect}")
    return statement.returning(*returning) if returning else statement


def insert_ignoring_conflicts(table: Any, bind: Any, returning: Sequence[Any] = ()) -> Any:
    """``INSERT ... ON CONFLICT DO NOTHING`` for the bound dialect, ``RETURNING`` these columns: the database, not a
    prior SELECT, decides which of two racing inserts wins. Cached: on a hot path give the values at execution.
    """
    return _insert_or_ignore(
        table.__table__ if hasattr(table, "__table__") else table, _dialect_name(bind), tuple(returning)
    )


def dialect_insert(table: Any, bind: Any) -> Any:
    """The dialect's own INSERT, for ``ON CONFLICT ... DO UPDATE`` (an upsert)."""
    dialect = _dialect_name(bind)
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"no upsert for {dialect}")


# 64-bit ids for tables that grow without bound. On SQLite an INTEGER PRIMARY KEY is already
# 64-bit and is the only type that autoincrements, so it stays INTEGER there.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# The execution option that marks a connection as opened for a unit of work (see writing() below).
WRITE_OPTION = "checkout_write"

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


def configure_engine(engine: Engine) -> None:
    """Make each database safe for several threads, processes and servers: see the dialect's own function."""
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine)
    elif engine.dialect.name == "postgresql":
        _configure_postgresql(engine)


def _configure_sqlite(engine: Engine) -> None:
    """Make SQLite safe for several threads and processes: a unit of work begins with ``BEGIN IMMEDIATE`` (a read
    that starts to write could fail at once with "database is locked"), a read with a lock-free deferred ``BEGIN``.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 30000")
        cursor.execute("PRAGMA foreign_keys = ON")
        if engine.url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: sa.engine.Connection) -> None:
        writes = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")


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


# --- the units of work: where transactions begin and end ---------------------------------


class TransactionError(RuntimeError):
    """A write outside a unit of work, or a transaction open where none may be."""


def _session() -> Session:
    """This request's (or this thread's) session: the object behind Flask-SQLAlchemy's scoped proxy."""
    return db.session()


def _write_continues_read(session: Session) -> bool:
    """Whether a write may go on in the read transaction before it: on PostgreSQL, whose sessions
    run READ COMMITTED (checkout.config names it): every statement sees what is committed when it starts,
    so nothing differs from a new transaction. Not on SQLite: a read transaction that starts to
    write fails if another writer committed since it began (SQLITE_BUSY_SNAPSHOT)."""
    return session.get_bind().dialect.name == "postgresql"


@contextmanager
def writing(*, durable: bool = True) -> Iterator[Session]:
    """One unit of work: everything inside commits together, or nothing does.

    ``durable=False``, for units that only add to the audit trail (a replay, a conflict): on PostgreSQL their
    commit does not wait for the disk. A crash may lose the last few such events, never a record, an order or a charge.
    """
    session = _session()
    reading_before = session.in_transaction()
    if reading_before and (session.new or session.dirty or session.deleted):
        raise TransactionError("objects were changed outside a unit of work; write inside `with writing():`")
    if reading_before and _write_continues_read(session):
        connection = session.connection()  # the read's transaction goes on: one BEGIN and COMMIT fewer
    else:
        if reading_before:
            # A read-only transaction: commit and rollback release the same nothing. Commit keeps the
            # objects it loaded usable (expire_on_commit=False); a rollback would expire them.
            session.commit()
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
