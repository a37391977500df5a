"""scripts/bench.py: it runs end to end with tiny numbers, and its bulk records
keep up with columns added to the idempotency table later.

Timings are never asserted: only that the benchmark completes and prints its tables.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import sqlalchemy as sa

from checkout.audit import IdempotencyRecord
from checkout.idempotency.types import COMPLETED
from tests.conftest import POSTGRES_URL

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scripts" / "bench.py"


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("checkout_bench_script", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def test_bulk_records_fill_not_null_columns_the_generator_was_never_told_about(database_url: str) -> None:
    bench = load_bench()
    table = IdempotencyRecord.__table__.to_metadata(sa.MetaData())
    for column in (
        sa.Column("tenant", sa.String(32), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("extra", sa.JSON, nullable=False),
        sa.Column("blob", sa.LargeBinary, nullable=False),
        sa.Column("region", sa.String(8), nullable=False, server_default="eu"),  # the database fills this one
    ):
        table.append_column(column)
    engine = sa.create_engine(database_url)
    try:
        table.metadata.create_all(engine)
        inserted, _seconds = bench.grow_table(engine, table, 300)
        with engine.connect() as connection:
            rows = connection.execute(sa.select(table)).mappings().all()
    finally:
        engine.dispose()
    assert inserted == 300
    assert len(rows) == 300
    assert len({row["tenant"] for row in rows}) == 300  # short unique text
    assert {row["attempts"] for row in rows} == {0}
    assert {row["region"] for row in rows} == {"eu"}
    assert all(row["extra"] == {} and bytes(row["blob"]) == b"" and row["seen_at"] for row in rows)
    assert {row["state"] for row in rows} == {COMPLETED}


@pytest.mark.slow
def test_the_benchmark_completes_with_tiny_numbers_and_prints_its_tables(tmp_path: Path) -> None:
    backend = "postgresql" if POSTGRES_URL else "sqlite"
    environment = {**os.environ, "BENCH_DATABASE_URL": POSTGRES_URL} if POSTGRES_URL else {**os.environ}
    numbers, table = tmp_path / "bench.json", tmp_path / "benchmark.md"
    table.write_text("# before\n<!-- make bench writes from here -->\nold\n<!-- to here -->\nafter\n")
    tiny = ["--clients", "2", "--requests", "6", "--batch", "3", "--replays", "5", "--records-max", "10100"]
    tiny += ["--storm", "10", "--workers", "2"]
    result = subprocess.run(
        [sys.executable, str(BENCH), "--backends", backend, *tiny, "--json", str(numbers), "--markdown", str(table)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for heading in ("side by side", "replay cost vs stored records", "the storm", "statements and commits"):
        assert heading in result.stdout
    for scenario in ("protected", "no store", "replay", "protected, lab off", "floor", "server CPU per request"):
        assert scenario in result.stdout
    assert "skipped" not in result.stdout
    saved = json.loads(numbers.read_text())
    assert {"side_by_side", "replay_by_table_size", "storm", "statements"} <= set(saved["backends"][backend])
    side_by_side = saved["backends"][backend]["side_by_side"].values()
    assert all(row["cpu_ms"] is not None for row in side_by_side)
    assert [row["non_2xx"] for row in side_by_side] == [0] * len(side_by_side)  # every server answered, the floor too
    assert "traceback" not in result.stdout
    written = table.read_text()
    assert "old" not in written and "| floor, 2 clients |" in written and written.endswith("<!-- to here -->\nafter\n")
