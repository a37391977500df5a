"""Units of work over the app's Flask-SQLAlchemy session: a write happens only in ``with writing():``, which commits
whole or not at all, and begins with ``BEGIN IMMEDIATE`` on SQLite (a read that turns into a write would fail at once
with "database is locked"). Nothing slow runs with a transaction open: ``assert_idle`` says so where it matters."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from flask import current_app
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

WRITE_OPTION = "idempotency_write"  # marks a connection opened for a unit of work (SQLite: BEGIN IMMEDIATE)


class TransactionError(RuntimeError):
    """A write outside a unit of work, or a transaction open where none may be."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def session() -> Session:
    found: Session = current_app.extensions["sqlalchemy"].session()  # this request's (or thread's)
    return found


@contextmanager
def writing(*, durable: bool = True) -> Iterator[Session]:
    """One unit of work: everything inside commits together, or nothing does. ``durable=False`` (notes alone): on
    PostgreSQL its commit does not wait for the disk, so a crash may lose the last notes, never a record."""
    current = session()
    reading_before = current.in_transaction()
    if reading_before and (current.new or current.dirty or current.deleted):
        raise TransactionError("objects were changed outside a unit of work; write inside `with writing():`")
    postgres = current.get_bind().dialect.name == "postgresql"
    # READ COMMITTED: each statement sees what is committed when it starts, so a read's transaction may go on. Not on
    # SQLite, where a read transaction that starts to write fails if another writer came between.
    if not (reading_before and postgres):
        if reading_before:
            current.commit()  # a read-only transaction; commit keeps the objects it loaded usable
        current.connection(execution_options={WRITE_OPTION: True})
    if not durable and postgres:
        current.execute(sa.text("SET LOCAL synchronous_commit TO OFF"))
    try:
        yield current
        current.commit()
    except BaseException:
        current.rollback()
        raise


@contextmanager
def reading() -> Iterator[Session]:
    """A read that must be over before something slow (an outside call): copy what you need inside the block."""
    assert_idle()
    current = session()
    try:
        yield current
    finally:
        current.rollback()


def assert_idle() -> None:
    """No transaction may be open here: an outside call is about to be made."""
    if session().in_transaction():
        raise TransactionError("a transaction is open where none may be (is an outside call made inside one?)")


@functools.cache
def _insert_or_ignore(table: sa.Table, dialect: str, returning: tuple[Any, ...]) -> Any:
    inserts: dict[str, Any] = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}
    if dialect not in inserts:
        raise NotImplementedError(f"no atomic insert-or-ignore for {dialect}")
    statement = inserts[dialect](table).on_conflict_do_nothing()
    return statement.returning(*returning) if returning else statement


def insert_ignoring_conflicts(table: Any, bind: Any, returning: Sequence[Any] = ()) -> Any:
    """``INSERT ... ON CONFLICT DO NOTHING [RETURNING ...]`` for the bound dialect: the database, not a prior
    SELECT, decides which of two racing inserts wins. Cached: give the values when you execute it."""
    dialect = bind.dialect if hasattr(bind, "dialect") else bind.get_bind().dialect
    return _insert_or_ignore(getattr(table, "__table__", table), dialect.name, tuple(returning))


# --- SQLite, safe for several threads and processes ------------------------------------------------


def configure_sqlite(engine: Engine) -> None:
    """WAL, a generous busy timeout, and ``BEGIN IMMEDIATE`` for units of work (a deferred ``BEGIN`` for reads)."""
    if engine.dialect.name == "sqlite" and not event.contains(engine, "begin", _begin):
        event.listen(engine, "connect", _connect)
        event.listen(engine, "begin", _begin)


def _connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # BEGIN is emitted by _begin
    cursor = dbapi_connection.cursor()
    for pragma in ("busy_timeout = 30000", "foreign_keys = ON", "journal_mode = WAL", "synchronous = NORMAL"):
        cursor.execute(f"PRAGMA {pragma}")  # WAL is a no-op for an in-memory database
    cursor.close()


def _begin(connection: sa.Connection) -> None:
    writes = connection.get_execution_options().get(WRITE_OPTION, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")
