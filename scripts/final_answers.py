"""How soon a client gets a final answer, measured from outside against a served shop (``make serve``, the lab on,
its relays running, on this machine: the script kills a worker by its pid).

    .venv/bin/python scripts/final_answers.py --url http://127.0.0.1:5000

1. ``Prefer: respond-async`` with the card whose gateway is down once: seconds from the 202 to ``succeeded``,
   polling the Location, with no retry and no reconcile.
2. Another key paying an ``orderId`` whose holder was SIGKILLed at the gateway (the very slow card): seconds from the
   kill to that key's final answer, retrying as ``Retry-After`` says, beside the holder's lease.
3. ``Prefer: wait=N`` on a key whose holder waits for the very slow card (it charges halfway, and the webhook
   relay pays the payment): seconds between the payment showing ``succeeded`` and the waiting duplicate's answer
   (sent N/2 seconds after the holder called the gateway, so that its wait spans the charge).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

UNAVAILABLE_ONCE, VERY_SLOW, GOOD = "4000000000000119", "4000000000000093", "4242424242424242"
TOKEN = {"Authorization": "Bearer demo-alice-token"}


def call(url: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={**TOKEN, **(headers or {})})
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, (json.loads(answer.read() or b"null"), dict(answer.headers))
    except urllib.error.HTTPError as error:
        with error:
            return error.code, (json.loads(error.read() or b"null"), dict(error.headers))


def pay(base: str, key: str, order_ref: str, card: str, **headers: str) -> tuple[int, Any]:
    body = {"orderId": order_ref, "amount": 3200, "currency": "USD", "card_number": card}
    return call(f"{base}/api/payments", "POST", body, {"Idempotency-Key": key, **headers})


def until(condition: Any, timeout: float = 120, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(every)
    raise TimeoutError("the condition never held")


def async_gateway_down_once(base: str) -> float:
    status, (body, headers) = pay(base, str(uuid.uuid4()), f"ord-{uuid.uuid4().hex[:8]}", UNAVAILABLE_ONCE,
                                  Prefer="respond-async")  # fmt: skip
    assert status == 202, (status, body)
    started = time.monotonic()
    until(lambda: call(base + headers["Location"])[1][0]["status"] != "pending")
    shown = call(base + headers["Location"])[1][0]["status"]
    assert shown == "succeeded", shown
    return time.monotonic() - started


def holder_pid(base: str, key: str) -> int:
    events = call(f"{base}/api/lab/ledger")[1][0]["events"]
    workers = [e["worker"] for e in events if e["key"] == key and e["event"] == "gateway_called"]
    return int(workers[0].rsplit(":", 1)[1]) if workers else 0


def _dies(base: str, key: str, order_ref: str) -> None:
    with contextlib.suppress(OSError):  # its worker is killed: the connection closes without an answer
        pay(base, key, order_ref, VERY_SLOW)


def other_key_after_a_killed_holder(base: str) -> tuple[float, list[int]]:
    order_ref, holder_key = f"ord-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    threading.Thread(target=_dies, args=(base, holder_key, order_ref), daemon=True).start()
    pid = until(lambda: holder_pid(base, holder_key))
    os.kill(pid, signal.SIGKILL)
    killed, statuses, key = time.monotonic(), [], str(uuid.uuid4())
    while True:
        status, (body, headers) = pay(base, key, order_ref, GOOD)
        statuses.append(status)
        if status != 409 or body.get("type") != "order-payment-in-progress":
            return time.monotonic() - killed, statuses
        time.sleep(int(headers.get("Retry-After", "1")))


def waiting_duplicate_wakes_on_final(base: str, wait: int) -> float:
    order_ref, key = f"ord-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    holder: dict[str, Any] = {}
    threading.Thread(target=lambda: holder.update(answer=pay(base, key, order_ref, VERY_SLOW)), daemon=True).start()
    until(lambda: holder_pid(base, key))
    time.sleep(wait / 2)  # so that the duplicate's wait spans the charge, halfway through the very slow card
    answered: dict[str, float] = {}

    def duplicate() -> None:
        pay(base, key, order_ref, VERY_SLOW, Prefer=f"wait={wait}")
        answered["at"] = time.monotonic()

    waiting = threading.Thread(target=duplicate)
    waiting.start()
    payment_id = until(lambda: _payment_of(base, order_ref))
    until(lambda: call(f"{base}/api/payments/{payment_id}")[1][0]["status"] == "succeeded", every=0.05)
    succeeded = time.monotonic()
    waiting.join()
    return answered["at"] - succeeded


def _payment_of(base: str, order_ref: str) -> str | None:
    events = call(f"{base}/api/lab/ledger")[1][0]["events"]
    found = [e.get("payment_id") for e in events if e["event"] == "payment_created" and e.get("order_ref") == order_ref]
    return found[0] if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:5000")
    parser.add_argument("--lease", type=float, default=30, help="the shop's CHECKOUT_LEASE_SECONDS, to compare")
    parser.add_argument("--wait", type=int, default=10, help="what the duplicate asks for: Prefer: wait=N")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="123", help="which of the three to measure (say 12)")
    args = parser.parse_args()
    base = args.url.rstrip("/")
    for run in range(1, args.runs + 1):
        if "1" in args.only:
            print(f"run {run}: respond-async, gateway down once: succeeded {async_gateway_down_once(base):.2f} s "
                  "after the 202")  # fmt: skip
        if "2" in args.only:
            seconds, statuses = other_key_after_a_killed_holder(base)
            print(f"run {run}: another key after the holder was killed: final {statuses[-1]} {seconds:.2f} s "
                  f"after the kill (lease {args.lease:g} s; answers {statuses})")  # fmt: skip
        if "3" in args.only:
            late = waiting_duplicate_wakes_on_final(base, args.wait)
            print(f"run {run}: Prefer: wait={args.wait} duplicate answered {late:+.2f} s after the payment "
                  "succeeded")  # fmt: skip


if __name__ == "__main__":
    main()
