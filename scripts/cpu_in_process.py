"""The CPU one request costs in process: the Flask test client, no server, no network.

    .venv/bin/python scripts/cpu_in_process.py                        # SQLite, then PostgreSQL if reachable
    .venv/bin/python scripts/cpu_in_process.py --backends sqlite --requests 500

For each database, a fresh app (a SQLite file, or a new PostgreSQL schema dropped at the end) takes
``--requests`` protected payments (``POST /api/orders``, a fresh key each), as many through the same
pipeline with no record store (the lab's unsafe twin), and as many replays of one key, interleaved in
batches so that whatever else the machine does hits them alike. It prints the process's CPU time per
request (``time.process_time``: robust to other load, unlike wall time) and the engine's share: what a
protected payment costs beyond the same pipeline with no store. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # measure this tree's code, whatever the venv has installed

from checkout import create_app  # noqa: E402
from checkout.database import writing  # noqa: E402
from checkout.extensions import db  # noqa: E402
from checkout.shop.seed import seed  # noqa: E402

POSTGRES_URL = os.environ.get("TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BODY = {"items": [{"sku": "MUG-01", "quantity": 1}], "email": "bench@example.com", "card_number": "4242424242424242"}
HEADERS = {"Authorization": "Bearer demo-alice-token"}


@contextmanager
def database(backend: str, folder: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'cpu.sqlite3'}"
        return
    schema, admin = f"cpu_{uuid.uuid4().hex[:10]}", sa.create_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as connection:
            connection.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def measure(backend: str, requests: int, batch: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder, database(backend, Path(folder)) as url:
        # The rate limit counts every request, as deployed (its token read is the request's), and never refuses one.
        config = {"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "c" * 40, "CHECKOUT_RATE_LIMIT": "1000000 per minute"}
        app = create_app(config, instance_path=str(Path(folder) / "instance"))
        with app.app_context():
            db.create_all()
            with writing():
                seed(demo_customers=True)
            db.session.remove()
        client = app.test_client()

        def post(path: str, key: str | None) -> None:
            headers = {**HEADERS, **({"Idempotency-Key": key} if key else {})}
            response = client.post(path, json=BODY, headers=headers)
            assert response.status_code == 201, response.get_data(as_text=True)

        replayed = str(uuid.uuid4())
        post("/api/orders", replayed)
        kinds: dict[str, Callable[[], None]] = {
            "protected": lambda: post("/api/orders", str(uuid.uuid4())),
            "no store": lambda: post("/api/lab/unsafe-orders", None),
            "replay": lambda: post("/api/orders", replayed),
        }
        for run in kinds.values():  # warm every path's caches first
            for _ in range(20):
                run()
        spent: dict[str, list[float]] = {name: [] for name in kinds}
        for _ in range(max(1, requests // batch)):
            for name, run in kinds.items():
                started = time.process_time()
                for _ in range(batch):
                    run()
                spent[name].append((time.process_time() - started) / batch)
        with app.app_context():
            db.engine.dispose()
    return {name: statistics.median(values) * 1000 for name, values in spent.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--requests", type=int, default=600, help="requests of each kind (default 600)")
    parser.add_argument("--batch", type=int, default=50, help="requests per interleaved batch (default 50)")
    options = parser.parse_args(argv)
    for backend in options.backends.split(","):
        try:
            found: dict[str, Any] = measure(backend, options.requests, options.batch)
        except sa.exc.OperationalError as error:
            print(f"{backend}: skipped ({str(error).splitlines()[0]})")
            continue
        cells = ", ".join(f"{name} {ms:.2f} ms" for name, ms in found.items())
        added = found["protected"] - found["no store"]
        print(f"{backend}: CPU per request: {cells}; the engine adds {added:.2f} ms to a payment")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
