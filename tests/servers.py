"""Real gunicorn servers for the multi-process tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]


def _wait_until_serving(url: str, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/api/products", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pause.wait(0.1)  # the port is not open yet
    raise RuntimeError(f"gunicorn at {url} did not start in {timeout}s")


@contextmanager
def gunicorn(
    database_url: str,
    instance: Path,
    *,
    servers: int = 1,
    workers: int = 4,
    settings: dict[str, str] | None = None,
    names: Sequence[str] = (),
) -> Iterator[list[Server]]:
    """Start ``servers`` gunicorn servers (each with ``workers`` workers) on one database.

    ``names``: each server's CHECKOUT_SERVER_NAME, in order (the lab's timeline shows it).
    """
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SECRET_KEY": "test-secret-key",  # every server and worker shares it
        "CHECKOUT_SLOW_CARD_SECONDS": "2",
        **(settings or {}),
    }
    started: list[Server] = []
    try:
        for index in range(servers):
            port = free_port()
            named = {"CHECKOUT_SERVER_NAME": names[index]} if index < len(names) else {}
            log = open(instance / f"gunicorn-{index}.log", "wb")  # noqa: SIM115 (closed with the process)
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "--config",
                    str(ROOT / "gunicorn.conf.py"),
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    str(workers),
                    "--access-logfile",
                    "/dev/null",
                    "--chdir",
                    str(instance),
                    "checkout:create_app()",
                ],
                env={**env, **named, "PYTHONPATH": str(ROOT)},
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
            log.close()  # the child has its own copy
            started.append(Server(f"http://127.0.0.1:{port}", process))
        for server in started:
            _wait_until_serving(server.url, server.process)
        yield started
    finally:
        for server in started:
            if server.process.poll() is None:
                server.process.send_signal(signal.SIGTERM)
        for server in started:
            try:
                server.process.wait(timeout=30)  # a graceful stop: up to gunicorn's 10 s, and its on_exit
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait()
