"""The client snippets docs/api.md sets up (examples/clients/), each run as its own program against a served shop
with every test card: each ends on a final status, and a paid order is charged once."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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
