"""make proxy as a newcomer runs it: ``python -m checkout.lab.proxy`` writes nginx's files and proxy.env, then
honcho starts Procfile.proxy. One app server dying must leave nginx and the other server serving (a real
deployment's failover, which exercise 14's proxy is about), where a supervisor that ends everything would not."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask

from tests.helpers import ALICE, Ledger, order_body, wait_for
from tests.http import post_json, send
from tests.proxies import NEEDS_NGINX
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SERVED = ("nginx", "app-1", "app-2")  # the relays are make proxy's too, but not what this is about


def serving(url: str) -> bool:
    try:
        return send("GET", f"{url}/api/products", timeout=2).status == 200
    except OSError:
        return False


def alive(pid: int) -> bool:
    """Running: not gone, and not a zombie nobody has reaped yet (an orphaned worker may stay one)."""
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True, check=False)
    return state.returncode == 0 and not state.stdout.strip().startswith("Z")


@contextlib.contextmanager
def make_proxy(
    database_url: str, instance: Path, servers: list[str], *, serving_first: bool = True, **settings: str
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``make proxy``'s two steps with its two servers (one worker each), no relays: honcho, and nginx's URL, once
    all three serve (``serving_first``). honcho's output goes to a log."""
    listen = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",  # as make puts the venv first
        "DATABASE_URL": database_url,
        "SECRET_KEY": "test-secret-key",
        "CHECKOUT_INSTANCE_PATH": str(instance),
        "GUNICORN_WORKERS": "1",
        "PYTHONUNBUFFERED": "1",
        **settings,
    }
    prefix = instance / "proxy"
    arguments = ["--listen", listen, "--servers", ",".join(servers), "--prefix", str(prefix)]
    subprocess.run([sys.executable, "-m", "checkout.lab.proxy", *arguments], cwd=ROOT, env=env, check=True)
    with open(instance / "honcho.log", "wb") as log:
        honcho = subprocess.Popen(
            [str(BIN / "honcho"), "start", "-f", "Procfile.proxy", "-e", str(prefix / "proxy.env"), *SERVED],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        if serving_first:
            up = (listen, *servers)
            wait_for(lambda: honcho.poll() is not None or all(serving(f"http://{a}") for a in up), timeout=60)
            assert honcho.poll() is None, (instance / "honcho.log").read_text()[-2000:]
        yield honcho, f"http://{listen}"
    finally:
        if honcho.poll() is None:
            honcho.send_signal(signal.SIGINT)  # Ctrl-C: honcho stops them all
        try:
            honcho.wait(timeout=30)
        except subprocess.TimeoutExpired:
            honcho.kill()
            honcho.wait()


@pytest.mark.slow
@pytest.mark.server
@NEEDS_NGINX
def test_a_server_that_dies_behind_make_proxy_leaves_nginx_and_the_other_serving(
    app: Flask, database_url: str, instance: Path, ledger: Ledger
) -> None:
    servers = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    with make_proxy(database_url, instance, servers) as (honcho, url):
        first = int((instance / "proxy" / "app-1.pid").read_text())
        second = int((instance / "proxy" / "app-2.pid").read_text())
        children = subprocess.run(["pgrep", "-P", str(first)], capture_output=True, text=True, check=True).stdout
        workers = [int(pid) for pid in children.split()]
        os.kill(first, signal.SIGKILL)  # app-1's gunicorn dies; its worker sees it gone and follows
        log = instance / "honcho.log"
        wait_for(lambda: "app-1 stopped: nginx sends every request to app-2" in log.read_text(), timeout=30)
        wait_for(lambda: not any(alive(pid) for pid in workers), timeout=30)
        assert not serving(f"http://{servers[0]}")
        assert [send("GET", f"{url}/api/products").status for _ in range(6)] == [200] * 6
        paid = post_json(f"{url}/api/orders", order_body(), {**ALICE, "Idempotency-Key": str(uuid.uuid4())})
        assert paid.status == 201, paid.body
        assert honcho.poll() is None and alive(second)  # honcho, nginx and app-2 go on
    assert honcho.returncode != -signal.SIGKILL  # Ctrl-C still stops them all, unforced (app-2 had its SIGTERM):
    wait_for(lambda: not alive(second), timeout=30)
    assert len(ledger.orders()) == len(ledger.succeeded_charges()) == 1


@pytest.mark.parametrize(
    ("switches", "processes"),
    [
        ({}, "nginx app-1 app-2 outbox webhooks events loyalty"),
        ({"CHECKOUT_OUTBOX_RELAY": "off"}, "nginx app-1 app-2 webhooks events loyalty"),  # exercise 9
        ({"CHECKOUT_LOYALTY_CONSUMER": "no"}, "nginx app-1 app-2 outbox webhooks events"),  # exercise 17
    ],
)
def test_make_proxy_starts_procfile_proxy_with_its_environment_and_the_relays_switched_on(
    switches: dict[str, str], processes: str
) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("CHECKOUT_", "MAKE"))}
    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", "proxy", "HOST=127.0.0.2", "PORT=5099"]
        + [f"{name}={value}" for name, value in switches.items()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    [prepare] = [line for line in dry if "-m checkout.lab.proxy" in line]
    [start] = [line for line in dry if "honcho start" in line]
    assert prepare.endswith(f'-m checkout.lab.proxy --listen 127.0.0.2:5099 --prefix "{ROOT}/instance/proxy"')
    assert start.endswith(f'honcho start -f Procfile.proxy -e "{ROOT}/instance/proxy/proxy.env" {processes}')


@pytest.mark.slow
@pytest.mark.server
@NEEDS_NGINX
def test_servers_that_cannot_start_stop_make_proxy_with_their_error(database_url: str, instance: Path) -> None:
    """Not a server killed: one that fails by itself (a setting that breaks a rule) ends its line, and honcho the
    rest, rather than nginx answering 502 alone."""
    servers = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    broken = {"CHECKOUT_LEASE_SECONDS": "1"}  # shorter than a gateway call: refused at start
    with make_proxy(database_url, instance, servers, serving_first=False, **broken) as (honcho, _url):
        honcho.wait(timeout=60)
    log = (instance / "honcho.log").read_text()
    assert honcho.returncode != 0 and "CHECKOUT_LEASE_SECONDS=1" in log, log
    assert "nginx sends every request" not in log
