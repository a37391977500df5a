"""The mass test: many payments through injected faults; is the money exact?

    python -m checkout.lab.mass --url http://127.0.0.1:5000            # the safe API
    python -m checkout.lab.mass --url http://127.0.0.1:5000 --unsafe   # the lab's unsafe twin
    python -m checkout.lab.mass --path /api/lab/stores/redis/orders     # any variant of POST /api/orders

A few clients send N payments (default 1000). Some use the fault cards (the
gateway is down once, or its answer is lost once), some the slow card, and
the clients wait only a short time for each answer, so answers get dropped and
retries happen. Every client retries the way ``checkout.client`` does: same
key, same body. At the end it compares the money the payments should have
taken with what the gateway charged: exact on the safe API; on the unsafe path
every retry is a new payment, and it shows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypedDict

from checkout.client import place_order

CARDS = [  # (card, weight, pays?)
    ("4242 4242 4242 4242", 80, True),
    ("4000 0000 0000 0119", 6, True),  # gateway down on the first try
    ("4000 0000 0000 0259", 6, True),  # answer lost on the first try
    ("4000 0000 0000 0077", 3, True),  # slow: the client gives up waiting, then retries
    ("4000 0000 0000 0002", 5, False),  # declined: final
]


@dataclass
class Outcome:
    expected_cents: int
    status: int | None
    attempts: int


def _get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def damage(base_url: str, prefix: str) -> dict[str, Any]:
    """The lab's own accounting of this run's purchases: the same numbers its damage table shows."""
    report = _get_json(f"{base_url}/api/lab/damage?purchase_prefix={prefix}")
    assert isinstance(report, dict)
    return dict(report["totals"])


class Report(TypedDict):
    path: str
    payments: int
    clients: int
    attempts: int
    unfinished: int
    seconds: float
    expected_cents: int
    ordered_cents: int
    charged_cents: int
    charged_more_than_once_cents: int
    never_charged_cents: int
    difference_cents: int
    purchase_prefix: str


def run(
    base_url: str,
    payments: int,
    clients: int,
    *,
    unsafe: bool,
    timeout: float,
    seed: int,
    token: str = "demo-alice-token",
    path: str = "/api/orders",
    per_second: float = 0,
) -> Report:
    """``per_second``: start at most this many payments a second (0: as fast as the clients go). A workshop's run
    of 300 at 5 a second lasts a minute: time for a person to press a button while it runs."""
    products = _get_json(f"{base_url}/api/products")
    assert isinstance(products, list) and products
    rng = random.Random(seed)
    prefix = f"mass-{uuid.uuid4().hex[:8]}-"
    plans = []
    for _ in range(payments):
        card, pays = _pick_card(rng)
        product = rng.choice(products[:-1])  # not the last product: its stock is one
        quantity = rng.randint(1, 3)
        body = {
            "items": [{"sku": product["sku"], "quantity": quantity}],
            "email": "mass@example.com",
            "card_number": card,
        }
        plans.append((body, product["price_cents"] * quantity if pays else 0, rng.random()))

    def one(number: int) -> Outcome:
        body, expected, jitter_seed = plans[number]
        if per_second > 0:
            threading.Event().wait(max(0.0, started + number / per_second - time.monotonic()))
        result = place_order(
            base_url,
            token,
            body,
            max_attempts=6,
            base_delay=0.05,
            max_delay=1.0,
            timeout=timeout,
            path="/api/lab/unsafe-orders" if unsafe else path,
            purchase=f"{prefix}{number}",  # the same on every retry: what the lab counts money by
            rng=random.Random(jitter_seed),
        )
        return Outcome(expected, result.status, len(result.attempts))

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        outcomes = list(pool.map(one, range(payments)))
    elapsed = time.monotonic() - started
    expected = sum(o.expected_cents for o in outcomes)
    counted = damage(base_url, prefix)
    charged = int(counted["charged_cents"])
    return Report(
        path="unsafe" if unsafe else "safe" if path == "/api/orders" else path,
        payments=payments,
        clients=clients,
        attempts=sum(o.attempts for o in outcomes),
        unfinished=sum(1 for o in outcomes if o.status not in (201, 402)),
        seconds=round(elapsed, 1),
        expected_cents=expected,
        ordered_cents=int(counted["ordered_cents"]),
        charged_cents=charged,
        charged_more_than_once_cents=int(counted["charged_more_than_once_cents"]),
        never_charged_cents=int(counted["never_charged_cents"]),
        difference_cents=charged - expected,
        purchase_prefix=prefix,
    )


def _pick_card(rng: random.Random) -> tuple[str, bool]:
    card, _weight, pays = rng.choices(CARDS, weights=[weight for _card, weight, _pays in CARDS])[0]
    return card, pays


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checkout.lab.mass", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("CHECKOUT_SHOP_URL") or "http://127.0.0.1:5000",
        help="the shop (CHECKOUT_SHOP_URL)",
    )
    parser.add_argument("--payments", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--timeout", type=float, default=1.0, help="seconds a client waits for an answer")
    parser.add_argument("--unsafe", action="store_true", help="use the lab's unsafe path (no idempotency)")
    parser.add_argument(
        "--path", default="/api/orders", help="where to POST: /api/orders, or a lab variant such as the Redis store's"
    )
    parser.add_argument(
        "--per-second", type=float, default=0, help="start at most this many payments a second (default: no limit)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--token", default="demo-alice-token", help="whose payments (a workshop seat's own token)")
    args = parser.parse_args(argv)
    url = args.url.rstrip("/")
    try:
        report = run(
            url,
            args.payments,
            args.clients,
            unsafe=args.unsafe,
            timeout=args.timeout,
            seed=args.seed,
            path=args.path,
            token=args.token,
            per_second=args.per_second,
        )
    except urllib.error.URLError as error:  # before any payment: its catalog did not answer
        if isinstance(error, urllib.error.HTTPError):
            raise  # the shop answered, with an error: that is not "no shop"
        print(f"no shop answers at {url} ({error.reason}): start it first (make run), or give --url", file=sys.stderr)
        return 2
    print(f"path:       {report['path']}")
    print(
        f"payments:   {report['payments']} by {report['clients']} clients, {report['attempts']} attempts "
        f"in {report['seconds']} s"
    )
    if report["unfinished"]:
        print(
            f"            {report['unfinished']} clients stopped retrying before they heard a final answer; "
            "their payments went on without them, and the money below counts them"
        )
    print(f"expected:   ${report['expected_cents'] / 100:,.2f}   (what the paying cards should have paid)")
    print(f"ordered:    ${report['ordered_cents'] / 100:,.2f}   (the lab's damage table: {report['purchase_prefix']}*)")
    print(f"charged:    ${report['charged_cents'] / 100:,.2f}")
    print(f"  more than once: ${report['charged_more_than_once_cents'] / 100:,.2f}")
    print(f"  never charged:  ${report['never_charged_cents'] / 100:,.2f}")
    difference = report["difference_cents"]
    exact = difference == 0 and not report["charged_more_than_once_cents"] and not report["never_charged_cents"]
    print("result:     exact" if exact else f"result:     OFF BY ${difference / 100:,.2f}")
    return 0 if exact or args.unsafe else 1


if __name__ == "__main__":
    sys.exit(main())
