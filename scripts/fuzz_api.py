"""schemathesis against a live shop: every answer must conform to /api/openapi.json, and none is a 5xx.

It starts the shop with gunicorn (2 workers) on a fresh SQLite database in a
temporary folder (or on DATABASE_URL, when given), waits for it, runs
schemathesis with the demo customer's bearer token and a fresh
Idempotency-Key per generated case (scripts/schemathesis_hooks.py), stops the
shop and exits with schemathesis's exit code.

    .venv/bin/python scripts/fuzz_api.py                 # make fuzz
    .venv/bin/python scripts/fuzz_api.py --max-examples 50
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance"  # noqa: E501 (one list, as the CLI takes it)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_serving(url: str, shop: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if shop.poll() is not None:
            raise SystemExit(f"the shop exited with {shop.returncode} before serving")
        try:
            with urllib.request.urlopen(f"{url}/api/openapi.json", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the shop at {url} did not start in {timeout:g} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-examples", type=int, default=40, help="cases per operation and phase (default: 40)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="checkout-fuzz-") as folder:
        env = {
            **os.environ,
            "CHECKOUT_INSTANCE_PATH": folder,
            "DATABASE_URL": os.environ.get("DATABASE_URL") or f"sqlite:///{folder}/fuzz.sqlite3",
            "CHECKOUT_SLOW_CARD_SECONDS": "0.2",  # a generated body may carry any test card
            "CHECKOUT_VERY_SLOW_CARD_SECONDS": "0.5",
        }
        flask = [str(BIN / "flask"), "--app", "checkout"]
        subprocess.run([*flask, "db", "upgrade"], env=env, cwd=ROOT, check=True, capture_output=True)
        subprocess.run([*flask, "seed"], env=env, cwd=ROOT, check=True, capture_output=True)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = open(Path(folder) / "shop.log", "wb")  # noqa: SIM115 (closed with the folder, after the shop)
        shop = subprocess.Popen(
            [str(BIN / "gunicorn"), "--workers=2", "--threads=4", f"--bind=127.0.0.1:{port}", "checkout:create_app()"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until_serving(url, shop)
            command = [
                str(BIN / "schemathesis"),
                "run",
                f"{url}/api/openapi.json",
                "--checks",
                CHECKS,
                "--header",
                "Authorization: Bearer demo-alice-token",
                "--max-examples",
                str(args.max_examples),
                "--workers",  # one: hypothesis's source introspection in two threads trips a CPython 3.11 race
                "1",
                "--seed",
                "20261201",
                "--no-color",
            ]
            hooks_env = {**os.environ, "SCHEMATHESIS_HOOKS": "schemathesis_hooks", "PYTHONPATH": str(ROOT / "scripts")}
            code = subprocess.run(command, env=hooks_env, cwd=ROOT).returncode
        finally:
            shop.send_signal(signal.SIGTERM)
            shop.wait(timeout=30)
            log.close()
        print_answers((Path(folder) / "shop.log").read_text())
        return code


def print_answers(log: str) -> None:
    """What the shop answered, by operation and status (from its access log): how deep the cases went."""
    answers: Counter[str] = Counter()
    for found in re.finditer(r'"(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) (\S+) HTTP/[\d.]+" (\d{3})', log):
        method, path, status = found.groups()
        path = re.sub(r"^/api/orders/[^/]+", "/api/orders/{order_id}", path.split("?", 1)[0])
        path = re.sub(r"/refunds/[^/]+", "/refunds/{refund_id}", path)
        path = re.sub(r"^/api/payments/[^/]+", "/api/payments/{payment_id}", path)
        answers[f"{method} {path} {status}"] += 1
    print("the shop's answers (method, path, status: count):")
    for line, count in sorted(answers.items()):
        print(f"  {line}: {count}")
    if any(line.rsplit(" ", 1)[1].startswith("5") for line in answers):
        print("!! 5xx answers above: see the shop's log lines for them in schemathesis's report")


if __name__ == "__main__":
    sys.exit(main())
