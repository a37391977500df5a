"""A retry client for the API: the client half of the idempotency pattern.

    python -m checkout.client --url http://127.0.0.1:5000 --token demo-alice-token \\
        --sku MUG-01 --quantity 2 --email alice@example.com --card "4000 0000 0000 0119"

It makes one key before the first attempt and sends it, with the same body,
on every retry. It retries what may succeed later (a network error, a 409
that says "try again", 502/503/504) with exponential backoff and full jitter,
honouring Retry-After, and never retries any other 4xx: those need a changed
request. A 409 says "try again" by its problem type (in progress) and its
Retry-After; a final 409 (``order-already-paid``, stored under the key) would
answer every retry the same, so it ends the run.

``--wrong-way`` makes a new key for every retry: the classic mistake. Against
a lost answer (card 4000 0000 0000 0259) it charges twice.

``--path`` sends to another endpoint with the same body and headers: the lab's
wrong twins, ``/api/lab/mistakes/<name>/orders`` (see /lab/mistakes), or its
variants of the safe path (the Redis store, the legacy gateway).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

RETRYABLE = {502, 503, 504}
# The purchase a request is part of, the same on every retry: the lab's damage table counts money by it (the shop
# itself reads no such thing).
PURCHASE_HEADER = "Lab-Purchase"
# The 409s that mean "not yet": the key's own request, or another key's payment of the same order, in progress.
TRY_AGAIN = {"idempotency-request-in-progress", "order-payment-in-progress"}


def retryable(status: int | None, raw: bytes, headers: dict[str, str]) -> bool:
    """No answer, a proxy or server that may answer later, or a 409 that says when to come back."""
    if status is None or status in RETRYABLE:
        return True
    if status != 409:
        return False
    try:
        kind = str(json.loads(raw).get("type", ""))
    except (ValueError, AttributeError):
        kind = ""
    return kind.rsplit("/", 1)[-1] in TRY_AGAIN or "Retry-After" in headers


@dataclass
class Attempt:
    number: int
    key: str
    status: int | None  # None: no answer (network error or timeout)
    detail: str
    waited: float = 0.0


@dataclass
class Result:
    status: int | None
    body: bytes
    headers: dict[str, str]
    attempts: list[Attempt] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)


def backoff(attempt: int, base: float, cap: float, retry_after: str | None, rng: random.Random) -> float:
    """Full jitter, but never sooner than the server asked."""
    delay = rng.uniform(0, min(cap, base * 2 ** (attempt - 1)))
    if retry_after and retry_after.strip().isdigit():
        delay = max(delay, float(retry_after))
    return delay


def place_order(
    base_url: str,
    token: str,
    body: dict[str, Any],
    *,
    key: str | None = None,
    max_attempts: int = 8,
    base_delay: float = 0.25,
    max_delay: float = 5.0,
    timeout: float = 10.0,
    wrong_way: bool = False,
    path: str = "/api/orders",
    purchase: str | None = None,
    log: Callable[[str], None] = lambda _line: None,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> Result:
    rng = rng or random.Random()
    key = key or str(uuid.uuid4())  # made once, before the first attempt
    payload = json.dumps(body).encode()  # the same bytes on every attempt
    attempts: list[Attempt] = []
    for number in range(1, max_attempts + 1):
        if wrong_way and number > 1:
            key = str(uuid.uuid4())  # THE MISTAKE: a retry that is a new operation
        request = urllib.request.Request(
            f"{base_url.rstrip('/')}{path}",
            data=payload,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {token}",
                "Idempotency-Key": key,
                **({PURCHASE_HEADER: purchase} if purchase else {}),
            },
        )
        status: int | None
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw, headers = response.status, response.read(), dict(response.headers)
        except urllib.error.HTTPError as error:
            with error:
                status, raw, headers = error.code, error.read(), dict(error.headers)
        except (urllib.error.URLError, OSError) as error:
            status, raw, headers = None, b"", {}
            detail = f"no answer ({getattr(error, 'reason', error)})"
        else:
            detail = ""
        if status is not None:
            detail = _describe(status, raw, headers)
        attempt = Attempt(number, key, status, detail)
        attempts.append(attempt)
        if not retryable(status, raw, headers) or number == max_attempts:
            log(f"attempt {number} key={key} -> {detail}")
            return Result(status, raw, headers, attempts)
        attempt.waited = backoff(number, base_delay, max_delay, headers.get("Retry-After"), rng)
        log(f"attempt {number} key={key} -> {detail}; retrying in {attempt.waited:.2f}s")
        sleep(attempt.waited)
    raise AssertionError("unreachable")


def _describe(status: int, raw: bytes, headers: dict[str, str]) -> str:
    text = f"{status}"
    if headers.get("Idempotent-Replayed") == "true":
        text += " (replayed)"
    try:
        body = json.loads(raw)
    except ValueError:
        return text
    if isinstance(body, dict):
        if "title" in body:
            text += f" {body['title']}"
        elif "id" in body:
            text += f" order {body['id']} {body.get('status', '')}".rstrip()
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m checkout.client",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("CHECKOUT_SHOP_URL") or "http://127.0.0.1:5000",
        help="the shop (CHECKOUT_SHOP_URL)",
    )
    parser.add_argument(
        "--path",
        default="/api/orders",
        help="where to POST, on the shop: a lab mistake's wrong twin (/api/lab/mistakes/<name>/orders), the Redis "
        "store (/api/lab/stores/redis/orders) or the legacy gateway (/api/lab/legacy-gateway/orders)",
    )
    parser.add_argument("--token", default="demo-alice-token", help="the API token (Authorization: Bearer ...)")
    parser.add_argument("--sku", default="MUG-01", help="the product to order")
    parser.add_argument("--quantity", type=int, default=1, help="how many (1 to 99)")
    parser.add_argument("--email", default="alice@example.com", help="the order's email")
    parser.add_argument("--card", default="4242 4242 4242 4242", help="the card number (a test card: see the README)")
    parser.add_argument(
        "--key", default=None, help="reuse this Idempotency-Key instead of making a new UUID4 (a retry of a retry)"
    )
    parser.add_argument(
        "--purchase",
        default=None,
        help="the purchase reference the lab counts money by, the same on every retry (default: a new UUID4)",
    )
    parser.add_argument("--attempts", type=int, default=8, help="give up after this many attempts")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each answer")
    parser.add_argument(
        "--wrong-way", action="store_true", help="WRONG WAY, for the workshop: a new key on every retry (charges twice)"
    )
    args = parser.parse_args(argv)
    if args.wrong_way:
        print("!! wrong way: every retry gets a NEW Idempotency-Key; the server cannot tell retries apart")
    body = {
        "items": [{"sku": args.sku, "quantity": args.quantity}],
        "email": args.email,
        "card_number": args.card,
    }
    result = place_order(
        args.url,
        args.token,
        body,
        key=args.key,
        max_attempts=args.attempts,
        timeout=args.timeout,
        wrong_way=args.wrong_way,
        path=args.path,
        purchase=args.purchase or f"client-{uuid.uuid4()}",
        log=print,
    )
    print(result.body.decode(errors="replace"))
    return 0 if result.status is not None and result.status < 400 else 1


if __name__ == "__main__":
    sys.exit(main())
