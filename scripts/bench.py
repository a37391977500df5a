"""What does "cannot charge twice" cost? A benchmark of the checkout, printed as tables.

    .venv/bin/python scripts/bench.py                    # SQLite, then PostgreSQL if it is reachable
    .venv/bin/python scripts/bench.py --backends sqlite --requests 40 --records-max 20000   # a quick look

For each database it starts from a fresh one (a file, or a new PostgreSQL schema
that is dropped at the end), serves the shop with real gunicorn servers on
127.0.0.1, and measures:

1. Side by side, interleaved batch after batch (whatever else the machine does
   hits them all alike), in the server's own CPU per request (read from /proc:
   robust to other load, unlike latency), latency median and p95, throughput,
   with 8 clients and then one: the protected ``POST /api/orders`` (a fresh
   key each), the same pipeline with no record store (the lab's unsafe twin,
   ``POST /api/lab/unsafe-orders``), a replay of one key; the protected path on
   a server with the lab off (as deployed), and the floor (scripts/floor_app.py:
   the least Flask and SQLAlchemy Core do for the same writes).
2. A replay as the idempotency table grows: records are bulk-inserted straight
   into the table (10,000, then ``--records-max``), and one real key is replayed.
3. The storm: 100 requests with one key and the slow card, all at the same
   instant, over two servers. How many charges (one is the only right answer),
   how many 5xx, and the p99 latency.
4. In process, the SQL statements and commits one request of each kind costs.

Timings are printed, never asserted, here or in the tests: they depend on the
machine, on what else it is doing and on the database's caches, so a check on
"fast enough" would fail on a busy laptop and pass on a broken design. The facts
(one charge per key, whatever the race) are what the test suite asserts.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.metadata
import itertools
import json
import logging
import math
import os
import platform
import secrets
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from flask import Flask
from psycopg import sql
from psycopg.types.json import Json
from sqlalchemy import event

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # measure this tree's code, whatever the venv has installed

import checkout  # noqa: E402
from checkout import create_app  # noqa: E402
from checkout.audit import IdempotencyRecord  # noqa: E402
from checkout.database import (  # noqa: E402
    configure_engine,
    utcnow,
    writing,
)
from checkout.extensions import db  # noqa: E402
from checkout.gateway.models import SUCCEEDED, GatewayCharge  # noqa: E402
from checkout.idempotency.types import COMPLETED, FINISHED  # noqa: E402
from checkout.shop.models import Order  # noqa: E402
from checkout.shop.payment import API_ENDPOINT  # noqa: E402
from checkout.shop.seed import seed  # noqa: E402

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
SECRET_KEY = "bench-secret-key"  # shared by every server and worker: the request fingerprints depend on it
SLOW_CARD_SECONDS = 2.0
HOST = "127.0.0.1"
ORDERS_PATH = "/api/orders"
UNSAFE_PATH = "/api/lab/unsafe-orders"
REDIS_STORE_PATH = "/api/lab/stores/redis/orders"
TOKEN = "demo-alice-token"
GOOD_CARD = "4242 4242 4242 4242"
SLOW_CARD = "4000 0000 0000 0077"
REQUEST_TIMEOUT_SECONDS = 30.0
FIRST_TABLE_SIZE = 10_000
SQLITE_CHUNK_ROWS = 10_000
REPLAY_WARMUP = 20


def say(text: str = "") -> None:
    print(text, flush=True)


def order_body(card: str) -> bytes:
    return json.dumps(
        {"items": [{"sku": "MUG-01", "quantity": 1}], "email": "bench@example.com", "card_number": card}
    ).encode()


GOOD_BODY = order_body(GOOD_CARD)


def request_headers(key: str | None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


# --- numbers ----------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    """Nearest rank: the smallest value with at least ``share`` of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(share * len(ordered))) - 1]


def milliseconds(seconds: float) -> float:
    return round(seconds * 1000, 2)


def ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 2) if denominator else None


def show_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


# --- the database -------------------------------------------------------------


def with_search_path(base_url: str, schema: str) -> str:
    """The URL of one schema: every connection sets its search_path (as tests/conftest.py does)."""
    separator = "&" if "?" in base_url else "?"
    return f"{base_url}{separator}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def fresh_database(backend: str, postgres_url: str, sqlite_path: Path) -> Iterator[str]:
    """A new, empty database: a SQLite file, or a PostgreSQL schema that is dropped afterwards."""
    if backend == "sqlite":
        yield f"sqlite:///{sqlite_path}"
        return
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_url)
    try:
        with admin.begin() as connection:
            connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        try:
            yield with_search_path(postgres_url, schema)
        finally:
            with admin.begin() as connection:
                connection.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        admin.dispose()


def bench_engine(database_url: str) -> sa.Engine:
    """The benchmark's own engine, with the app's SQLite locking rules (it shares the file with the servers)."""
    engine = sa.create_engine(database_url)
    configure_engine(engine)
    return engine


def postgres_version(url: str) -> str:
    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as connection:
            return str(connection.execute(sa.text("SHOW server_version")).scalar_one())
    finally:
        engine.dispose()


def count_rows(engine: sa.Engine, table: sa.Table) -> int:
    with engine.connect() as connection:
        return int(connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def key_outcome(engine: sa.Engine, key: str) -> tuple[int, int]:
    """(orders, succeeded charges) for one Idempotency-Key, read from the ledger tables."""
    orders, charges = Order.__table__, GatewayCharge.__table__
    paid = charges.join(orders, charges.c.reference == orders.c.public_id)
    with engine.connect() as connection:
        order_count = connection.execute(
            sa.select(sa.func.count()).select_from(orders).where(orders.c.idempotency_key == key)
        ).scalar_one()
        charge_count = connection.execute(
            sa.select(sa.func.count())
            .select_from(paid)
            .where(orders.c.idempotency_key == key, charges.c.status == SUCCEEDED)
        ).scalar_one()
    return int(order_count), int(charge_count)


# --- bulk records ---------------------------------------------------------------

# What a bulk-inserted record holds, column by column: a completed API payment,
# spread over a thousand customers. A column not named here is filled from its
# type when it is NOT NULL and the database has no default for it.
RECORD_VALUES: dict[str, Callable[[int, datetime], Any]] = {
    "customer": lambda index, now: f"cus_bench_{index % 1000:03d}",
    "endpoint": lambda index, now: API_ENDPOINT,
    "key": lambda index, now: str(uuid.uuid4()),
    "fingerprint": lambda index, now: secrets.token_hex(32),
    "state": lambda index, now: COMPLETED,
    "recovery_point": lambda index, now: FINISHED,
    "response_status": lambda index, now: 201,
    "response_headers": lambda index, now: {"Content-Type": "application/json", "Location": "/api/orders/ord_bench"},
    "response_body": lambda index, now: b'{"id": "ord_bench", "status": "paid", "total_cents": 1400}',
    "created_at": lambda index, now: now,
    "updated_at": lambda index, now: now,
    "completed_at": lambda index, now: now,
    "expires_at": lambda index, now: now + timedelta(days=1),
}


def columns_to_fill(table: sa.Table) -> list[sa.Column[Any]]:
    """The named columns, and every NOT NULL column the database cannot fill by itself."""
    return [
        column
        for column in table.columns
        if column is not table.autoincrement_column
        and (column.name in RECORD_VALUES or (not column.nullable and column.server_default is None))
    ]


def value_for_type(column: sa.Column[Any], index: int, now: datetime) -> Any:
    """A valid value for a column nobody told us about, from its type."""
    type_ = column.type
    if isinstance(type_, sa.types.TypeDecorator):
        type_ = type_.impl_instance
    if isinstance(type_, sa.Enum):
        return type_.enums[0]
    if isinstance(type_, sa.Boolean):
        return False
    if isinstance(type_, sa.Integer | sa.Numeric):
        return 0
    if isinstance(type_, sa.DateTime):
        return now
    if isinstance(type_, sa.Date):
        return now.date()
    if isinstance(type_, sa.JSON):
        return {}
    if isinstance(type_, sa.LargeBinary):
        return b""
    if isinstance(type_, sa.Uuid):
        return uuid.uuid4()
    if isinstance(type_, sa.String):
        return f"b{index}"  # short, and unique in case the column must be
    raise TypeError(f"no bench value for {column.name} ({column.type}); add it to RECORD_VALUES")


def column_value(column: sa.Column[Any], index: int, now: datetime) -> Any:
    if column.name in RECORD_VALUES:
        return RECORD_VALUES[column.name](index, now)
    default = column.default
    if default is not None and default.is_scalar:
        return default.arg  # type: ignore[attr-defined]
    return value_for_type(column, index, now)


def generated_rows(table: sa.Table, first_index: int, count: int) -> Iterator[dict[str, Any]]:
    columns = columns_to_fill(table)
    now = utcnow()
    for index in range(first_index, first_index + count):
        yield {column.name: column_value(column, index, now) for column in columns}


def chunked(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    iterator = iter(rows)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def insert_with_executemany(engine: sa.Engine, table: sa.Table, rows: Iterable[dict[str, Any]]) -> None:
    with engine.begin() as connection:  # one transaction for the lot
        for chunk in chunked(rows, SQLITE_CHUNK_ROWS):
            connection.execute(table.insert(), chunk)


def insert_with_copy(engine: sa.Engine, table: sa.Table, rows: Iterable[dict[str, Any]]) -> None:
    """PostgreSQL's COPY, through psycopg's own connection: the fastest way in."""
    names = [column.name for column in columns_to_fill(table)]
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table.name), sql.SQL(", ").join(sql.Identifier(name) for name in names)
    )
    connection = engine.raw_connection()
    psycopg_connection = connection.driver_connection
    assert psycopg_connection is not None
    try:
        with psycopg_connection.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row([Json(row[name]) if isinstance(row[name], dict) else row[name] for name in names])
        connection.commit()
    finally:
        connection.close()
    with engine.begin() as analyze:
        # What autovacuum would do soon anyway: the planner should know the table grew.
        analyze.execute(sa.text(f"ANALYZE {engine.dialect.identifier_preparer.quote(table.name)}"))


def grow_table(engine: sa.Engine, table: sa.Table, size: int) -> tuple[int, float]:
    """Bulk-insert generated rows until ``table`` holds ``size`` rows; (rows inserted, seconds)."""
    existing = count_rows(engine, table)
    missing = max(0, size - existing)
    started = time.perf_counter()
    rows = generated_rows(table, first_index=existing, count=missing)
    if engine.dialect.name == "postgresql":
        insert_with_copy(engine, table, rows)
    else:
        insert_with_executemany(engine, table, rows)
    return missing, time.perf_counter() - started


# --- gunicorn -------------------------------------------------------------------


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def app_environment(database_url: str) -> dict[str, str]:
    """What every subprocess gets: this tree's code, the database, the shared secret, the lab on."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": database_url,
        "SECRET_KEY": SECRET_KEY,
        "CHECKOUT_ENV": "development",  # the demo customers and the lab (the unsafe twin lives there)
        "CHECKOUT_LAB": "true",
        "CHECKOUT_SLOW_CARD_SECONDS": str(SLOW_CARD_SECONDS),
    }


def flask_command(database_url: str, folder: Path, *arguments: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "checkout", *arguments],
        env=app_environment(database_url),
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"flask {' '.join(arguments)} failed:\n{result.stderr[-3000:]}")


def wait_until_serving(server: Server, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"gunicorn {server.name} exited with {server.process.returncode}:\n{log_tail(server)}")
        connection = http.client.HTTPConnection(HOST, server.port, timeout=2)
        try:
            connection.request("GET", "/api/products")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)  # not listening yet
        finally:
            connection.close()
    raise RuntimeError(f"gunicorn {server.name} did not answer within {timeout:.0f} s:\n{log_tail(server)}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (gunicorn's graceful stop), then SIGKILL if it takes too long."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def log_tail(server: Server, lines: int = 30) -> str:
    try:
        return "\n".join(server.log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def first_traceback(server: Server, lines: int = 40) -> str:
    try:
        text = server.log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    start = text.rfind("\n", 0, max(text.find("Traceback"), 0)) + 1
    return "\n".join(text[start:].splitlines()[:lines])


def tracebacks_logged(server: Server) -> int:
    try:
        return server.log.read_text(errors="replace").count("Traceback")
    except OSError:
        return 0


@contextmanager
def gunicorn_server(
    database_url: str,
    folder: Path,
    name: str,
    workers: int,
    settings: dict[str, str] | None = None,
    app: str = "checkout:create_app()",
) -> Iterator[Server]:
    """One gunicorn server with the project's gunicorn.conf.py, like tests/servers.py starts them."""
    port = free_port()
    log = folder / f"gunicorn-{name}.log"
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "--config",
        str(ROOT / "gunicorn.conf.py"),
        "--bind",
        f"{HOST}:{port}",
        "--workers",
        str(workers),
        "--access-logfile",
        "/dev/null",
        "--chdir",
        str(folder),
        app,
    ]
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            env={**app_environment(database_url), "CHECKOUT_SHOP_URL": f"http://{HOST}:{port}", **(settings or {})},
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
    server = Server(name, port, process, log)
    try:
        wait_until_serving(server)
        yield server
    finally:
        stop(process)
        if tracebacks := tracebacks_logged(server):
            say(f"  ! gunicorn {name} logged {tracebacks} traceback(s); the first:\n{first_traceback(server)}")


def floor_server(database_url: str, folder: Path, workers: int) -> AbstractContextManager[Server]:
    """The floor (scripts/floor_app.py) with the same gunicorn settings: the least Flask does for these writes."""
    subprocess.run(
        [sys.executable, "-c", "import os, scripts.floor_app as f; f.prepare(os.environ['DATABASE_URL'])"],
        env=app_environment(database_url),
        cwd=ROOT,
        check=True,
        timeout=120,  # a database that does not answer stops the bench, as flask_command's does
    )
    return gunicorn_server(database_url, folder, "floor", workers, app="scripts.floor_app:create_app()")


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """A process and all its descendants (gunicorn's master and its workers), from /proc."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            found += process_tree(int(child))
    return found


def cpu_seconds(server: Server) -> float:
    """The CPU time (user + system) the server's processes have used so far: what serving costs, whatever else
    the machine runs (latency would count the clients, the database and the other load too)."""
    total = 0
    for pid in process_tree(server.process.pid):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICKS


# --- HTTP clients ---------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    status: int  # 0: no answer at all
    seconds: float
    replayed: bool


def timed_post(connection: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str]) -> Reply:
    started = time.perf_counter()
    connection.request("POST", path, body=body, headers=headers)
    response = connection.getresponse()
    response.read()
    replayed = response.getheader("Idempotent-Replayed") == "true"
    return Reply(response.status, time.perf_counter() - started, replayed)


NO_ANSWER = Reply(0, 0.0, False)


def post_or_no_answer(connection: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str]) -> Reply:
    try:
        return timed_post(connection, path, body, headers)
    except (OSError, http.client.HTTPException):
        connection.close()
        return NO_ANSWER


class Client:
    """One keep-alive connection to one server, used by one thread at a time."""

    def __init__(self, server: Server) -> None:
        self.connection = http.client.HTTPConnection(HOST, server.port, timeout=REQUEST_TIMEOUT_SECONDS)

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> Reply:
        try:
            return timed_post(self.connection, path, body, headers)
        except (ConnectionResetError, BrokenPipeError):
            # The server had closed the idle keep-alive connection: reconnect and send it once more.
            self.connection.close()
            return post_or_no_answer(self.connection, path, body, headers)
        except (OSError, http.client.HTTPException):
            self.connection.close()
            return NO_ANSWER

    def close(self) -> None:
        self.connection.close()


def latency_summary(replies: list[Reply]) -> dict[str, Any]:
    answered = [reply.seconds for reply in replies if reply.status]
    if not answered:
        return {"median_ms": None, "p95_ms": None, "p99_ms": None}
    return {
        "median_ms": milliseconds(statistics.median(answered)),
        "p95_ms": milliseconds(percentile(answered, 0.95)),
        "p99_ms": milliseconds(percentile(answered, 0.99)),
    }


# --- 1. side by side ------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    server: Server
    path: str
    next_key: Callable[[], str | None]  # the Idempotency-Key of the next request; None sends no header

    def send(self, client: Client) -> Reply:
        return client.post(self.path, GOOD_BODY, request_headers(self.next_key()))


@dataclass
class Tally:
    replies: list[Reply] = field(default_factory=list)
    elapsed: float = 0.0  # wall-clock seconds of this scenario's batches
    cpu: float = 0.0  # CPU seconds its server's processes used during them

    def summary(self) -> dict[str, Any]:
        statuses = Counter(reply.status for reply in self.replies)
        return {
            "requests": len(self.replies),
            "cpu_ms": round(1000 * self.cpu / len(self.replies), 2) if self.replies else None,
            **latency_summary(self.replies),
            "requests_per_second": round(len(self.replies) / self.elapsed, 1) if self.elapsed else None,
            "non_2xx": sum(count for status, count in statuses.items() if not 200 <= status < 300),
            "replayed": sum(reply.replayed for reply in self.replies),
            "statuses": {str(status): count for status, count in sorted(statuses.items())},
        }


def run_batch(pool: ThreadPoolExecutor, clients: list[Client], scenario: Scenario, count: int) -> Tally:
    """``count`` requests of one scenario shared out over the clients, each sending its share in turn."""
    base, extra = divmod(count, len(clients))
    shares = [base + 1 if index < extra else base for index in range(len(clients))]

    def one_client(index: int) -> list[Reply]:
        return [scenario.send(clients[index]) for _ in range(shares[index])]

    cpu_before, started = cpu_seconds(scenario.server), time.perf_counter()
    replies = [reply for share in pool.map(one_client, range(len(clients))) for reply in share]
    return Tally(replies, time.perf_counter() - started, cpu_seconds(scenario.server) - cpu_before)


def side_by_side(
    shop: Server, clients: int, requests: int, batch: int, *, lab_off: Server | None = None,
    floor: Server | None = None, redis_store: bool = False,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """The scenarios interleaved, batch after batch, so whatever else the machine does hits them alike.

    ``protected`` and ``no store`` (the same pipeline with no record store: the lab's unsafe twin) run on one
    server with the lab on; ``protected, lab off`` beside ``floor`` measure the shop as it is deployed against
    the least Flask can do for the same writes."""
    replay_key = str(uuid.uuid4())
    scenarios = [
        Scenario("protected", shop, ORDERS_PATH, lambda: str(uuid.uuid4())),
        # A key it ignores: the lab's request log writes for both alike, so the difference is the record store's.
        Scenario("no store", shop, UNSAFE_PATH, lambda: str(uuid.uuid4())),
        Scenario("replay", shop, ORDERS_PATH, lambda: replay_key),
    ]
    if lab_off is not None:
        scenarios.append(Scenario("protected, lab off", lab_off, ORDERS_PATH, lambda: str(uuid.uuid4())))
    if floor is not None:
        scenarios.append(Scenario("floor", floor, ORDERS_PATH, lambda: None))
    if redis_store:  # the same payment, its idempotency records in Redis (SET NX) instead of the database
        scenarios = [scenarios[0], Scenario("redis", shop, REDIS_STORE_PATH, lambda: str(uuid.uuid4()))]
    servers = {scenario.server.name: scenario.server for scenario in scenarios}
    connections = {name: [Client(server) for _ in range(clients)] for name, server in servers.items()}
    tallies = {scenario.name: Tally() for scenario in scenarios}
    try:
        placed = connections[shop.name][0].post(ORDERS_PATH, GOOD_BODY, request_headers(replay_key))
        if placed.status != 201:
            raise RuntimeError(f"placing the key to replay answered {placed.status}")
        with ThreadPoolExecutor(max_workers=clients) as pool:
            for scenario in scenarios:  # warm-up, not counted: every worker has its connections and caches
                run_batch(pool, connections[scenario.server.name], scenario, 4 * clients)
            for round_index in range(math.ceil(requests / batch)):
                count = min(batch, requests - round_index * batch)
                shift = round_index % len(scenarios)  # who goes first changes every round
                for scenario in scenarios[shift:] + scenarios[:shift]:
                    done = run_batch(pool, connections[scenario.server.name], scenario, count)
                    tallies[scenario.name].replies += done.replies
                    tallies[scenario.name].elapsed += done.elapsed
                    tallies[scenario.name].cpu += done.cpu
    finally:
        for connection in (connection for group in connections.values() for connection in group):
            connection.close()
    return {name: tally.summary() for name, tally in tallies.items()}


def side_by_side_ratios(results: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """The issue's targets: protected at most 2x the floor and 1.10x the no-store pipeline, a replay at most a
    quarter of a payment, all in the server's CPU per request."""

    def cpu(name: str) -> float:
        return float(results.get(name, {}).get("cpu_ms") or 0)

    return {
        "protected_over_floor_cpu": ratio(cpu("protected, lab off"), cpu("floor")),
        "protected_over_no_store_cpu": ratio(cpu("protected"), cpu("no store")),
        "replay_over_protected_cpu": ratio(cpu("replay"), cpu("protected")),
        "protected_over_no_store_median": ratio(
            results["protected"]["median_ms"] or 0, results.get("no store", {}).get("median_ms") or 0
        ),
    }


def print_side_by_side(results: dict[str, dict[str, Any]], ratios: dict[str, float | None]) -> None:
    say(f"  {'scenario':<19} {'requests':>8} {'CPU ms':>7} {'median ms':>10} {'p95 ms':>9} {'req/s':>8} {'non-2xx':>8}")
    for name, row in results.items():
        say(
            f"  {name:<19} {row['requests']:>8} {row['cpu_ms'] or 0:>7.2f} {row['median_ms'] or 0:>10.2f}"
            f" {row['p95_ms'] or 0:>9.2f} {row['requests_per_second'] or 0:>8.1f} {row['non_2xx']:>8}"
        )
    say(
        f"  server CPU per request: protected (lab off)/floor {show_ratio(ratios['protected_over_floor_cpu'])}, "
        f"protected/no store {show_ratio(ratios['protected_over_no_store_cpu'])}, "
        f"replay/protected {show_ratio(ratios['replay_over_protected_cpu'])}"
    )
    if "redis" in results:
        over = ratio(results["redis"]["cpu_ms"] or 0, results["protected"]["cpu_ms"] or 0)
        say(f"  redis store/protected CPU {show_ratio(over)}")
    replay = results.get("replay")
    if replay and replay["replayed"] != replay["requests"]:
        say(f"  ! only {replay['replayed']} of {replay['requests']} replays said Idempotent-Replayed: true")
    if any(row["non_2xx"] for row in results.values()):
        say("  ! statuses: " + "; ".join(f"{name} {row['statuses']}" for name, row in results.items()))


# --- 2. replay cost vs stored records ------------------------------------------


def replay_cost_by_table_size(
    server: Server, engine: sa.Engine, sizes: list[int], replays: int
) -> list[dict[str, Any]]:
    table = IdempotencyRecord.__table__
    client = Client(server)
    key = str(uuid.uuid4())
    try:
        placed = client.post(ORDERS_PATH, GOOD_BODY, request_headers(key))
        if placed.status != 201:
            raise RuntimeError(f"placing the key to replay answered {placed.status}")
        levels = []
        for size in sizes:
            say(f"  filling {table.name} up to {size:,} records ...")
            inserted, seconds = grow_table(engine, table, size)
            for _ in range(REPLAY_WARMUP):
                client.post(ORDERS_PATH, GOOD_BODY, request_headers(key))
            replies = [client.post(ORDERS_PATH, GOOD_BODY, request_headers(key)) for _ in range(replays)]
            levels.append(
                {
                    "records": count_rows(engine, table),
                    "inserted": inserted,
                    "insert_seconds": round(seconds, 2),
                    "replays": len(replies),
                    **latency_summary(replies),
                    "not_replayed": sum(not reply.replayed for reply in replies),
                }
            )
    finally:
        client.close()
    return levels


def print_replay_cost(levels: list[dict[str, Any]]) -> None:
    say(f"  {'records':>10} {'inserted':>10} {'insert s':>9} {'replays':>8} {'median ms':>10} {'p95 ms':>9}")
    for level in levels:
        say(
            f"  {level['records']:>10,} {level['inserted']:>10,} {level['insert_seconds']:>9.2f}"
            f" {level['replays']:>8} {level['median_ms'] or 0:>10.2f} {level['p95_ms'] or 0:>9.2f}"
        )
        if level["not_replayed"]:
            say(f"  ! {level['not_replayed']} replies were not replays")
    if len(levels) > 1:
        first, last = levels[0], levels[-1]
        say(
            f"  replay median at {last['records']:,} / at {first['records']:,} records: "
            f"{show_ratio(ratio(last['median_ms'] or 0, first['median_ms'] or 0))}"
        )


def table_sizes(records_max: int) -> list[int]:
    return sorted({min(FIRST_TABLE_SIZE, records_max), records_max})


# --- 3. the storm ---------------------------------------------------------------


def storm(servers: list[Server], requests: int, engine: sa.Engine) -> dict[str, Any]:
    """``requests`` requests with one key and the slow card, released at once, shared over the servers."""
    key = str(uuid.uuid4())
    body = order_body(SLOW_CARD)
    barrier = threading.Barrier(requests, timeout=60)

    def one(index: int) -> Reply:
        server = servers[index % len(servers)]
        connection = http.client.HTTPConnection(HOST, server.port, timeout=REQUEST_TIMEOUT_SECONDS)
        try:
            connection.connect()  # connected before the barrier, so only the requests race
            barrier.wait()
            return timed_post(connection, ORDERS_PATH, body, request_headers(key))
        except (OSError, http.client.HTTPException, threading.BrokenBarrierError):
            barrier.abort()  # nobody waits for a client that could not connect
            return NO_ANSWER
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=requests) as pool:
        replies = list(pool.map(one, range(requests)))
    orders, charges = key_outcome(engine, key)
    statuses = Counter(reply.status for reply in replies)
    answered = [reply.seconds for reply in replies if reply.status]
    p99 = milliseconds(percentile(answered, 0.99)) if answered else None
    return {
        "requests": requests,
        "servers": len(servers),
        "statuses": {str(status): count for status, count in sorted(statuses.items())},
        "orders": orders,
        "succeeded_charges": charges,
        "server_errors_5xx": sum(count for status, count in statuses.items() if status >= 500),
        "no_answer": statuses[0],
        "p99_ms": p99,
        "max_ms": milliseconds(max(answered)) if answered else None,
        "p99_limit_ms": milliseconds(SLOW_CARD_SECONDS + 1),
        "p99_within_limit": p99 is not None and p99 <= milliseconds(SLOW_CARD_SECONDS + 1),
    }


def print_storm(result: dict[str, Any]) -> None:
    statuses = ", ".join(
        f"{count} x {'no answer' if status == '0' else status}" for status, count in result["statuses"].items()
    )
    say(f"  answers: {statuses}")
    say(
        f"  orders for the key: {result['orders']}; succeeded charges: {result['succeeded_charges']}"
        f"{'' if result['succeeded_charges'] == 1 else '   <-- ! must be exactly 1'}"
    )
    say(f"  5xx: {result['server_errors_5xx']}; no answer: {result['no_answer']}")
    within = "yes" if result["p99_within_limit"] else "NO"
    say(
        f"  p99 latency {result['p99_ms']} ms (max {result['max_ms']} ms);"
        f" p99 within slow card + 1 s ({result['p99_limit_ms']:.0f} ms): {within}"
    )


# --- 4. statements and commits per request ---------------------------------------


@dataclass
class StatementCounter:
    """Counts what the app sends to the database, by the statement's first word."""

    kinds: Counter[str] = field(default_factory=Counter)
    commits: int = 0

    def attach(self, engine: sa.Engine) -> None:
        event.listen(engine, "before_cursor_execute", self.on_statement)
        event.listen(engine, "commit", self.on_commit)

    def on_statement(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.kinds[statement.split(None, 1)[0].upper()] += 1

    def on_commit(self, _conn: Any) -> None:
        self.commits += 1

    def reset(self) -> None:
        self.kinds.clear()
        self.commits = 0


def engines_of(app: Flask) -> list[sa.Engine]:
    """Every engine the app uses: Flask-SQLAlchemy's, and any an extension keeps (the gateway's)."""
    with app.app_context():
        found = list(db.engines.values())
        for extension in app.extensions.values():
            engine = getattr(extension, "engine", None)
            if isinstance(engine, sa.Engine) and all(engine is not seen for seen in found):
                found.append(engine)
    return found


def statements_per_request(database_url: str) -> dict[str, Any]:
    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": database_url,
            "SECRET_KEY": SECRET_KEY,
            "CHECKOUT_ENV": "development",
            "CHECKOUT_LAB": True,  # the unsafe twin lives in the lab
        }
    )
    with app.app_context():
        db.create_all()
        with writing():
            seed(demo_customers=True)
        db.session.remove()
    logging.getLogger("checkout_audit").setLevel(logging.WARNING)  # its JSON lines would bury the table
    engines = engines_of(app)
    counter = StatementCounter()
    for engine in engines:
        counter.attach(engine)
    client = app.test_client()
    key = str(uuid.uuid4())
    requests = [("protected", ORDERS_PATH, key), ("no store", UNSAFE_PATH, None), ("replay", ORDERS_PATH, key)]
    counts: dict[str, Any] = {}
    try:
        # Warm-up, not counted: the first request of each kind opens connections.
        client.post(ORDERS_PATH, data=GOOD_BODY, headers=request_headers(str(uuid.uuid4())))
        client.post(UNSAFE_PATH, data=GOOD_BODY, headers=request_headers(None))
        for name, path, request_key in requests:
            counter.reset()
            response = client.post(path, data=GOOD_BODY, headers=request_headers(request_key))
            counts[name] = {
                "status": response.status_code,
                "statements": sum(counter.kinds.values()),
                "commits": counter.commits,
                "by_kind": dict(counter.kinds.most_common()),
            }
    finally:
        with app.app_context():
            db.session.remove()
        for engine in engines:
            engine.dispose()
    return {"engines_watched": len(engines), "requests": counts}


def print_statements(result: dict[str, Any]) -> None:
    say(f"  {'request':<10} {'status':>6} {'statements':>10} {'commits':>8}  by kind")
    for name, row in result["requests"].items():
        kinds = ", ".join(f"{kind} {count}" for kind, count in row["by_kind"].items())
        say(f"  {name:<10} {row['status']:>6} {row['statements']:>10} {row['commits']:>8}  {kinds}")
    say(f"  ({result['engines_watched']} engine(s) watched: the gateway's ledger writes are counted too)")


# --- one backend ----------------------------------------------------------------


def bench_backend(backend: str, postgres_url: str, options: argparse.Namespace, folder: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with fresh_database(backend, postgres_url, folder / "bench.sqlite3") as database_url:
        started = time.perf_counter()
        flask_command(database_url, folder, "db", "upgrade")
        flask_command(database_url, folder, "seed")
        say(f"  fresh database: db upgrade + seed in {time.perf_counter() - started:.1f} s")
        engine = bench_engine(database_url)
        try:
            with (
                gunicorn_server(database_url, folder, "first", options.workers) as first,
                gunicorn_server(database_url, folder, "lab-off", options.workers, {"CHECKOUT_LAB": "false"}) as off,
                floor_server(database_url, folder, options.workers) as floor,
            ):
                say(
                    f"\n  [1] side by side, {options.workers} workers per server, {options.clients} clients,"
                    f" {options.requests} requests each, interleaved in batches of {options.batch}"
                )
                results["side_by_side"] = side_by_side(
                    first, options.clients, options.requests, options.batch, lab_off=off, floor=floor
                )
                results["side_by_side_ratios"] = side_by_side_ratios(results["side_by_side"])
                print_side_by_side(results["side_by_side"], results["side_by_side_ratios"])

                # One client: what each request costs on its own, with no queue for the CPU or SQLite's lock.
                alone = max(options.requests // 2, 1)
                say(f"\n  [1b] one client at a time, {alone} requests each, interleaved in batches of {options.batch}")
                results["one_client"] = side_by_side(first, 1, alone, options.batch, lab_off=off, floor=floor)
                results["one_client_ratios"] = side_by_side_ratios(results["one_client"])
                print_side_by_side(results["one_client"], results["one_client_ratios"])

                if options.redis_url:
                    say(f"\n  [1c] the Redis store beside them ({options.redis_url}; a server of its own)")
                    with gunicorn_server(
                        database_url, folder, "redis", options.workers, {"CHECKOUT_REDIS_URL": options.redis_url}
                    ) as with_redis:
                        results["redis_store"] = side_by_side(
                            with_redis, options.clients, options.requests, options.batch, redis_store=True
                        )
                    print_side_by_side(results["redis_store"], side_by_side_ratios(results["redis_store"]))

                say(f"\n  [2] replay cost vs stored records ({options.replays} replays of one key, one client)")
                results["replay_by_table_size"] = replay_cost_by_table_size(
                    first, engine, table_sizes(options.records_max), options.replays
                )
                print_replay_cost(results["replay_by_table_size"])

                with gunicorn_server(database_url, folder, "second", options.workers) as second:
                    say(
                        f"\n  [3] the storm: {options.storm} requests, one key, the slow card ({SLOW_CARD_SECONDS} s),"
                        f" at once over {first.address} and {second.address} ({options.workers} workers each)"
                    )
                    results["storm"] = storm([first, second], options.storm, engine)
                    print_storm(results["storm"])
        finally:
            engine.dispose()
    with fresh_database(backend, postgres_url, folder / "statements.sqlite3") as database_url:
        say("\n  [4] statements and commits per request (in process, the test client, a fresh database)")
        results["statements"] = statements_per_request(database_url)
        print_statements(results["statements"])
    return results


# --- the machine and main ---------------------------------------------------------


def library_versions() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in ("Flask", "SQLAlchemy", "psycopg", "gunicorn")}


def git_commit() -> str:
    result = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() or "unknown"


def machine(postgres: str) -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "sqlite": sqlite3.sqlite_version,
        "postgresql": postgres,
        "libraries": library_versions(),
        "code": f"{Path(checkout.__file__).parent.parent} @ {git_commit()}",
    }


# --- the table in docs/benchmark.md ----------------------------------------------------

TABLE_BEGIN, TABLE_END = "<!-- make bench writes from here -->", "<!-- to here -->"


def markdown_table(results: dict[str, Any]) -> str:
    """The numbers of this run as docs/benchmark.md shows them, one column per database."""
    backends = {name: found for name, found in results["backends"].items() if "skipped" not in found}
    info = results["machine"]

    def cells(pick: Callable[[dict[str, Any]], str]) -> str:
        return " | ".join(pick(found) for found in backends.values())

    def row(label: str, pick: Callable[[dict[str, Any]], str]) -> str:
        return f"| {label} | {cells(pick)} |"

    def scenario(part: str, name: str) -> Callable[[dict[str, Any]], str]:
        def pick(found: dict[str, Any]) -> str:
            one = found[part][name]
            if one["median_ms"] is None:  # no request succeeded: the run printed why
                return "no answer"
            latency = f"{one['median_ms']:.1f} / {one['p95_ms']:.1f} ms"
            return f"{one['cpu_ms']:.1f} ms; {latency}; {one['requests_per_second']:.0f}/s"

        return pick

    def ratios(part: str, name: str) -> Callable[[dict[str, Any]], str]:
        return lambda found: show_ratio(found[part][name])

    def storm(found: dict[str, Any]) -> str:
        result = found["storm"]
        answers = ", ".join(f"{count} × {status}" for status, count in result["statuses"].items())
        return (
            f"{answers}; {result['succeeded_charges']} charge(s), {result['server_errors_5xx']} × 5xx, "
            f"p99 {result['p99_ms']:.0f} ms"
        )

    def statements(found: dict[str, Any]) -> str:
        rows = found["statements"]["requests"]
        return ", ".join(f"{rows[name]['statements']} ({rows[name]['commits']})" for name in rows)

    def replay_growth(found: dict[str, Any]) -> str:
        levels = found["replay_by_table_size"]
        return show_ratio(ratio(levels[-1]["median_ms"] or 0, levels[0]["median_ms"] or 0))

    options = results["options"]
    lines = [
        f"One run on {time.strftime('%Y-%m-%d')}: {info['platform']}, {info['cpus']} CPUs, Python {info['python']}, "
        f"SQLite {info['sqlite']}, PostgreSQL {info['postgresql']}; "
        + ", ".join(f"{name} {version}" for name, version in info["libraries"].items())
        + f"; gunicorn {options['workers']} workers × 4 threads per server, {options['requests']} requests per "
        f"scenario. Each cell: the server's CPU per request; latency median / p95; throughput.",
        "",
        "| " + " | ".join(["", *(name for name in backends)]) + " |",
        "| " + " | ".join(["---"] * (len(backends) + 1)) + " |",
    ]
    for part, clients in (("side_by_side", f"{options['clients']} clients"), ("one_client", "1 client")):
        for name in ("protected", "no store", "replay", "protected, lab off", "floor"):
            lines.append(row(f"{name}, {clients}", scenario(part, name)))
        lines.append(
            row(f"protected (lab off) ÷ floor, CPU, {clients}", ratios(part + "_ratios", "protected_over_floor_cpu"))
        )
        lines.append(
            row(f"protected ÷ no store, CPU, {clients}", ratios(part + "_ratios", "protected_over_no_store_cpu"))
        )
        lines.append(row(f"replay ÷ protected, CPU, {clients}", ratios(part + "_ratios", "replay_over_protected_cpu")))
    lines.append(row(f"replay at {options['records_max']:,} ÷ at {FIRST_TABLE_SIZE:,} records, median", replay_growth))
    lines.append(row(f"storm: {options['storm']} requests, one key, two servers", storm))
    lines.append(row("statements (commits): protected, no store, replay", statements))
    return "\n".join(lines)


def write_table(path: Path, table: str) -> None:
    text = path.read_text()
    start, end = text.index(TABLE_BEGIN) + len(TABLE_BEGIN), text.index(TABLE_END)
    path.write_text(text[:start] + "\n" + table + "\n" + text[end:])


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--requests", type=int, default=400, help="requests per scenario (default 400)")
    parser.add_argument("--batch", type=int, default=50, help="requests per interleaved batch (default 50)")
    parser.add_argument("--replays", type=int, default=300, help="replays per table size (default 300)")
    parser.add_argument("--records-max", type=int, default=1_000_000, help="largest table size (default 1000000)")
    parser.add_argument("--storm", type=int, default=100, help="requests in the storm (default 100)")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers per server (default 4)")
    parser.add_argument(
        "--redis-url",
        default="",
        help="also measure the lab's Redis store on a server using this Redis (its rate limits count there too)",
    )
    parser.add_argument("--json", type=Path, help="also write every number to this file")
    parser.add_argument(
        "--markdown",
        type=Path,
        help=f"rewrite the table of this file (docs/benchmark.md) between {TABLE_BEGIN!r} and its end",
    )
    options = parser.parse_args(argv)
    options.backends = [name.strip() for name in options.backends.split(",") if name.strip()]
    unknown = set(options.backends) - {"sqlite", "postgresql"}
    if unknown:
        parser.error(f"unknown backend(s): {', '.join(sorted(unknown))}")
    for name in ("clients", "requests", "batch", "replays", "records_max", "storm", "workers"):
        if getattr(options, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return options


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: the servers are stopped


def main(argv: list[str] | None = None) -> int:
    options = parse_arguments(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if not Path(checkout.__file__).is_relative_to(ROOT):
        raise SystemExit(f"checkout was imported from {checkout.__file__}, not from {ROOT}")
    postgres_url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_POSTGRES_URL)
    shown_url = sa.make_url(postgres_url).render_as_string(hide_password=True)
    postgres_problem = ""
    try:
        postgres = postgres_version(postgres_url)
    except (sa.exc.SQLAlchemyError, OSError) as error:
        postgres_problem = str(error).strip().splitlines()[0]
        postgres = f"not reachable at {shown_url}"

    results: dict[str, Any] = {
        "machine": machine(postgres),
        "options": vars(options) | {"json": str(options.json), "markdown": str(options.markdown)},
    }
    info = results["machine"]
    say(f"Checkout bench, {time.strftime('%Y-%m-%d %H:%M:%S')}")
    say(f"machine: {info['platform']}; {info['cpus']} CPUs; Python {info['python']}; load {info['load_average']}")
    say(f"backends: SQLite {info['sqlite']}; PostgreSQL {postgres}")
    say("libraries: " + ", ".join(f"{name} {version}" for name, version in info["libraries"].items()))
    say(f"code: {info['code']}")
    say("timings are printed, never asserted; compare numbers from one run on one idle machine")

    results["backends"] = {}
    with tempfile.TemporaryDirectory(prefix="checkout-bench-") as temporary:
        # Every app this run makes, in process or in a server, keeps its secrets here, not in instance/.
        os.environ["CHECKOUT_INSTANCE_PATH"] = str(Path(temporary) / "instance")
        for backend in options.backends:
            say(f"\n== {backend} ==")
            if backend == "postgresql" and postgres_problem:
                say(f"  skipped: PostgreSQL is not reachable at {shown_url} ({postgres_problem})")
                results["backends"][backend] = {"skipped": postgres_problem}
                continue
            folder = Path(temporary) / backend
            folder.mkdir()
            started = time.perf_counter()
            results["backends"][backend] = bench_backend(backend, postgres_url, options, folder)
            results["backends"][backend]["seconds"] = round(time.perf_counter() - started, 1)
            say(f"\n  {backend} done in {results['backends'][backend]['seconds']:.0f} s")
    if options.markdown:
        write_table(options.markdown, markdown_table(results))
        say(f"\nthe table in {options.markdown} rewritten")
    if options.json:
        options.json.write_text(json.dumps(results, indent=2) + "\n")
        say(f"\nnumbers written to {options.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        say("\ninterrupted: every server was stopped")
        sys.exit(130)
