"""The client snippets docs/api.md sets up (examples/clients/), each run as its own program against a served shop
with every test card: each ends on a final status, and a paid order is charged once."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from checkout.shop.models import Order
from tests.conftest import LiveServer
from tests.helpers import Ledger

pytestmark = pytest.mark.server

CLIENTS = Path(__file__).resolve().parent.parent / "examples" / "clients"
# Each test card, and the final status it must end on. The very slow card outlasts the gateway's timeout here
# (its answer is lost, 503), and charges halfway: the retry finds that charge.
CARDS = {
    "4242 4242 4242 4242": 201,
    "4000 0000 0000 0002": 402,
    "4000 0000 0000 0119": 201,
    "4000 0000 0000 0259": 201,
    "4000 0000 0000 0077": 201,
    "4000 0000 0000 0093": 201,
}
GOOD = "4242 4242 4242 4242"
QUICK_CARDS = {
    "CHECKOUT_SLOW_CARD_SECONDS": 1.0,
    "CHECKOUT_VERY_SLOW_CARD_SECONDS": 3.0,
    "CHECKOUT_GATEWAY_TIMEOUT_SECONDS": 2.0,
}


def program(name: str) -> list[str]:
    if name.endswith(".mjs"):
        node = shutil.which("node")
        if node is None:
            pytest.skip("the fetch snippet needs Node.js 18 or later (Debian or Ubuntu: apt-get install nodejs)")
        return [node, str(CLIENTS / name)]
    return [sys.executable, str(CLIENTS / name)]


def run(command: list[str], url: str, card: str) -> dict[str, Any]:
    done = subprocess.run([*command, url, card], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


@pytest.mark.parametrize("app_overrides", [QUICK_CARDS])
@pytest.mark.parametrize("snippet", ["requests_retry.py", "httpx_retry.py", "fetch_retry.mjs"])
def test_each_client_snippet_ends_on_a_final_status_for_every_test_card_and_charges_once(
    live_server: LiveServer, ledger: Ledger, snippet: str, app_overrides: dict[str, Any]
) -> None:
    command = program(snippet)
    with ThreadPoolExecutor(max_workers=len(CARDS)) as pool:
        answers = dict(zip(CARDS, pool.map(lambda card: run(command, live_server.url, card), CARDS), strict=True))
    assert {card: answer["status"] for card, answer in answers.items()} == CARDS
    for card, answer in answers.items():
        order_id = answer["body"]["id"] if answer["status"] == 201 else answer["body"]["order_id"]
        [order] = ledger.rows(Order, Order.public_id == order_id)
        charged = [c for c in ledger.succeeded_charges() if c.reference == order_id]
        assert (order.status, len(charged)) == (("paid", 1) if CARDS[card] == 201 else ("declined", 0)), card


class Scripted(BaseHTTPRequestHandler):
    """Answers POSTs from a script: each entry (status, headers, body), the last one for good."""

    script: ClassVar[list[tuple[int, dict[str, str], dict[str, Any]]]] = []
    seen: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append(self.headers["Idempotency-Key"])
        status, headers, body = self.script[min(len(self.seen), len(self.script)) - 1]
        payload = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/problem+json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_args: Any) -> None:
        pass


def scripted(script: list[tuple[int, dict[str, str], dict[str, Any]]]) -> tuple[ThreadingHTTPServer, str]:
    handler = type("Handler", (Scripted,), {"script": script, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


ALREADY_PAID = (409, {}, {"type": "order-already-paid", "status": 409, "id": "pay_1"})
IN_PROGRESS = (409, {"Retry-After": "1"}, {"type": "idempotency-request-in-progress", "status": 409})
PAID = (201, {"Content-Type": "application/json"}, {"id": "ord_1", "status": "paid"})


@pytest.mark.parametrize("snippet", ["requests_retry.py", "httpx_retry.py", "fetch_retry.mjs"])
def test_each_client_snippet_stops_on_a_final_409_and_retries_one_in_progress_with_the_same_key(snippet: str) -> None:
    command = program(snippet)
    for script, statuses in (([ALREADY_PAID], [409]), ([IN_PROGRESS, PAID], [409, 201])):
        server, url = scripted(script)
        try:
            answer = run(command, url, GOOD)
        finally:
            server.shutdown()
            server.server_close()
        seen = server.RequestHandlerClass.seen  # type: ignore[attr-defined]
        assert (answer["status"], len(seen)) == (statuses[-1], len(statuses)), (snippet, script[0][2]["type"])
        assert len(set(seen)) == 1  # one key, on every try
