"""Database plumbing shared by every layer: the declarative base, UTC
timestamps, portable "insert unless it exists", and SQLite's locking setup.

Nothing here knows about orders, payments or idempotency.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase

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


def table_of(model: type[Base]) -> sa.Table:
    """A model's Table, typed as one (SQLAlchemy types ``__table__`` as a FromClause, which Core's
    ``update``/``delete`` refuse; a declarative model's is always a Table, and this checks it)."""
    table = model.__table__
    if not isinstance(table, sa.Table):
        raise TypeError(f"{model.__name__} is not mapped to a Table")
    return table


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
def _insert_or_ignore(table: sa.Table, dialect: str) -> Any:
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    raise NotImplementedError(f"no atomic insert-or-ignore for {dialect}")


def insert_ignoring_conflicts(table: Any, bind: Any) -> Any:
    """``INSERT ... ON CONFLICT DO NOTHING`` for the bound dialect.

    This is what makes a claim atomic: the database, not a prior SELECT,
    decides which of two racing inserts wins. (Built once per table and
    dialect: give the values at execution, or with ``.values()``.)
    """
    return _insert_or_ignore(table.__table__ if hasattr(table, "__table__") else table, _dialect_name(bind))


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

# The execution option that marks a connection as opened for a unit of work (see checkout.transactions).
WRITE_OPTION = "checkout_write"


def configure_engine(engine: Engine) -> None:
    """Make SQLite safe for several threads and processes.

    SQLite's default deferred BEGIN takes the write lock at the first write,
    so a transaction that reads and then writes can fail at once with
    "database is locked". A unit of work (``checkout.transactions.writing``)
    therefore begins with ``BEGIN IMMEDIATE`` and takes the lock up front; a
    plain read begins with a deferred ``BEGIN`` and takes no lock at all (WAL:
    readers never block the writer). A generous busy timeout makes writers
    queue instead of failing.
    """
    if engine.dialect.name != "sqlite":
        return

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
