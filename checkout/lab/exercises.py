"""The workshop's exercises. /lab/exercises renders them; the README's workshop
section says the same; tests/browser/test_exercises.py does each one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    slug: str
    title: str
    steps: tuple[str, ...]
    expect: str
    layer: str


EXERCISES = (
    Exercise(
        "double-click",
        "1. Double-click Pay",
        (
            "Add something to the cart and open the checkout.",
            "Pay with the slow card 4000 0000 0000 0077, double-clicking the Pay button.",
            "Open the lab.",
        ),
        "One order, one succeeded charge. The button turned into “Processing payment…” after the first click.",
        "Client (the disabled button) and server (the atomic claim of the key).",
    ),
    Exercise(
        "lost-answer",
        "2. The answer is lost",
        (
            "Pay with 4000 0000 0000 0259: the gateway charges, but its answer never reaches the shop.",
            "Read the page: “we could not confirm your payment yet”. Type the card again and press Pay.",
            "Open the lab and the timeline of the key.",
        ),
        "The second Pay shows the paid order. The lab shows one charge, made by the first attempt; the "
        "timeline shows answer_lost, released, resumed, charged.",
        "Downstream (the gateway is idempotent on a key derived from the order) and recovery points.",
    ),
    Exercise(
        "gateway-down",
        "3. The gateway is down",
        (
            "Pay with 4000 0000 0000 0119: the gateway is unavailable on the first call.",
            "Check the lab: the record is in progress at order_created, with no charge and no lease.",
            "Type the card again and press Pay.",
        ),
        "The first Pay charges nothing and asks you to try again; the second Pay shows the paid order, with one "
        "charge.",
        "Recovery: the lease is released at once, so the retry resumes without waiting.",
    ),
    Exercise(
        "racing-tabs",
        "4. Racing tabs",
        (
            "Open the checkout in two tabs (the same cart renders the same key in both).",
            "Fill both with 4000 0000 0000 0077; press Pay in the first tab, then at once in the second.",
        ),
        "Both tabs end on the same order; the second says it was already placed and charged once. One charge.",
        "Server: the second request finds the key in progress and waits for the first's answer.",
    ),
    Exercise(
        "killed-worker",
        "5. A worker dies mid-payment",
        (
            "Serve with several workers: make serve.",
            "Pay with 4000 0000 0000 0077 and go straight to the lab (leave the payment page, or the browser "
            "may resend the payment by itself); while it runs, kill the worker named in the key's timeline: "
            "kill -9 <pid>.",
            "Never retry. After the lease (30 s) run: flask --app checkout idempotency reconcile.",
        ),
        "Reconcile asks the gateway by the order's gateway key and finishes the payment: the order is paid, with "
        "exactly one charge (or ended as failed with none, if the worker died before the gateway charged).",
        "Recovery: leases, recovery points, and reconcile.",
    ),
    Exercise(
        "unsafe",
        "6. The unsafe path",
        (
            "Open the lab's unsafe checkout (no key, no constraint, no button guard).",
            "Pay with 4000 0000 0000 0077 and press Pay twice.",
            "Open the lab and compare the damage table with the safe path's.",
        ),
        "Two orders and two charges for one purchase: the lab shows the amount charged twice. The safe checkout "
        "never shows more than zero.",
        "None: this is the bug the other layers prevent.",
    ),
)
