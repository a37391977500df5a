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
            "Add something to the cart and open the checkout. Pay with the slow card 4000 0000 0000 0077, "
            "double-clicking the Pay button: it turns into “Processing payment…” and the second click sends "
            "nothing. That is the first layer, the button.",
            "Now open the lab and press “Turn the Pay button guard off (this browser)”.",
            "Add something again, pay with 4000 0000 0000 0077, and press Pay again a moment later, while the "
            "first press is still processing (a quick double-click is not enough: the browser replaces the first "
            "submit with the second before it leaves, and only one reaches the server).",
            "Open the lab: your latest payment's timeline leads the page.",
        ),
        "Two payments reached the server this time, and still one order and one succeeded charge: the timeline "
        "shows a conflict (the second click arrived while the first was running) or a replay, and the counters "
        "count it. The damage table shows $0.00 charged more than once.",
        "Client (the disabled button); with it off, the server (the atomic claim of the key).",
    ),
    Exercise(
        "lost-answer",
        "2. The answer is lost",
        (
            "Pay with 4000 0000 0000 0259: the gateway charges, but its answer never reaches the shop.",
            "Read the page: “we could not confirm your payment yet”. Type the card again and press Pay.",
            "Open the lab: the timeline of your latest payment.",
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
            "Check the lab: your payment is in progress at order_created, with no charge and nobody holding it.",
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
            "Open the checkout in two tabs (the same cart renders the same key in both: it is made once, in the "
            "database).",
            "Fill both with 4000 0000 0000 0077; press Pay in the first tab, then at once in the second.",
        ),
        "Both tabs end on the same order; the second says it was already placed and charged once. One charge.",
        "Server: the second request finds the key in progress and waits for the first's answer.",
    ),
    Exercise(
        "killed-worker",
        "5. A worker dies mid-payment",
        (
            "Serve the shop with several workers: make serve (not make run: with one worker, killing it kills "
            "the shop).",
            "Add something to the cart, open the checkout, and pay with the very slow card "
            "4000 0000 0000 0093 (it takes 20 seconds; it charges at 10). Then open the lab in another tab "
            "(leave the payment's tab alone, or the browser may resend the payment by itself).",
            "In the lab, your latest payment shows the worker holding it and the command to kill it. Press "
            "“Kill worker …” (or run the kill -9 command shown) within those 20 seconds.",
            "Never retry. Wait for the lease to run out (30 seconds; the lab shows how long), then press "
            "“Run reconcile now”.",
        ),
        "Reconcile fences the gateway key and finishes the payment: killed after the gateway charged (after 10 "
        "seconds), the order is paid with exactly one charge; killed before, it ends as failed with no charge, "
        "and no late charge can land under its key. The damage table stays at $0.00 charged more than once.",
        "Recovery: leases, recovery points, fencing, and reconcile.",
    ),
    Exercise(
        "unsafe",
        "6. The unsafe path",
        (
            "Open the lab's unsafe checkout (no key, no constraint, no button guard).",
            "Pay with 4000 0000 0000 0077 and press Pay again a moment later, while the first press is still "
            "processing.",
            "Open the lab and compare the damage table's unsafe row with the safe one.",
        ),
        "Two orders and two charges for one purchase: the lab shows the price charged more than once. The safe "
        "checkout never shows more than zero.",
        "None: this is the bug the other layers prevent.",
    ),
    Exercise(
        "double-refund",
        "7. Refund twice",
        (
            "Pay for something with the slow card 4000 0000 0000 0077 (a refund of its charge is slow too).",
            "On the order page, type 5.00 in the refund form, press Refund, and press it again a moment later, "
            "while the first is still being processed.",
            "Open the lab: the refunds table.",
        ),
        "The second Refund shows the same order with “You already asked for this refund”: $5.00 was refunded "
        "once. The refund form carries a key of its own; its endpoint is a second scope for keys.",
        "Server: the refund's own idempotency key; database: never more refunded than charged.",
    ),
    Exercise(
        "webhook-thrice",
        "8. A webhook delivered three times",
        (
            "Pay with 4000 0000 0000 0259 (the gateway charges; its answer is lost) and leave that page alone.",
            "In the lab, find the gateway's charge.succeeded event. Press its Redeliver button three times.",
        ),
        "The event is applied once: the order is paid once, one confirmation email is written, and the lab "
        "counts the deliveries it ignored as duplicates. The event id is the webhook's idempotency key.",
        "Webhook receiver: the event id claimed in the transaction that applies it.",
    ),
    Exercise(
        "relay-crash",
        "9. The mail relay dies between sending and marking",
        (
            "Start the shop with the background mail relay off, so that it does not send the email first: "
            "CHECKOUT_OUTBOX_RELAY=off make run. Pay for something with 4242 4242 4242 4242: the payment writes "
            "its confirmation email into the outbox, in the same transaction.",
            "In a second terminal, run .venv/bin/flask --app checkout outbox relay --crash-after-send: the relay "
            "sends the confirmation, then dies before it can mark it sent.",
            "Open the lab's mailbox (the “Mailbox” button): one copy received, and the outbox still says the "
            "message is not sent, held by the relay that died.",
            "Once that relay's claim has run out (20 seconds after the crash; until then the command says how long "
            "to wait), run .venv/bin/flask --app checkout outbox relay.",
            "Open the mailbox again.",
        ),
        "The relay sent the confirmation again, with the same Message-ID: the mailbox shows two copies of one "
        "message and counts 1 duplicate, the copy a receiver drops by its Message-ID. The outbox marks the "
        "message sent once, after 2 attempts.",
        "Downstream, at least once: the email is written in the payment's transaction, the relay marks it sent "
        "only after sending it, and a Message-ID derived from the outbox row lets the receiver keep one copy.",
    ),
    Exercise(
        "last-item",
        "10. Two shoppers, one last lamp",
        (
            "Open the shop in two browsers (or a normal and a private window): two shoppers, two carts.",
            "In both, add the Last-One Lamp (there is one), open the checkout, and fill in 4000 0000 0000 0077.",
            "Press Pay in the first, then at once in the second.",
        ),
        "One shopper gets the lamp, paid once; the other sees that it sold out while they were paying, and "
        "nothing is charged. The lab's stock table stays balanced.",
        "Database: a conditional UPDATE that can never take stock below zero, in the order's own transaction.",
    ),
    Exercise(
        "webhook-alone",
        "11. A lost answer, finished by the webhook alone",
        (
            "Pay with 4000 0000 0000 0259: the page says it could not confirm the payment. Do not press Pay "
            "again: close the page.",
            "Wait a few seconds (the gateway's relay delivers its events every second), or press “Deliver due "
            "events now” in the lab.",
            "Open Orders.",
        ),
        "The order is paid, with one charge, though you never retried: the gateway's charge.succeeded event "
        "finished it. If you do press Pay again later, you land on the same order.",
        "Webhook receiver, and the order's conditional move from pending to paid (whoever comes first).",
    ),
    Exercise(
        "redis-forgets",
        "12. Redis forgets a key",
        (
            "Serve the shop with its Redis store on: CHECKOUT_REDIS_URL=redis://127.0.0.1:6379/0 make run. The "
            "lab's header says whether Redis answers (“Redis store: answering”).",
            "In a second terminal, start 300 payments through the Redis store: make mass "
            'MASS_ARGS="--path /api/lab/stores/redis/orders --payments 300".',
            "While it runs, open the lab's Redis store page (the “Redis store” button) and press “Make Redis "
            "forget every key of this store”.",
            "When the run ends, read its result, then the damage table's store:redis row in the lab.",
        ),
        "The run ends exact: every payment charged once, though Redis forgot the records of the payments in "
        "flight. Their retries claimed their keys again (a key's timeline shows claimed twice, and order_found "
        "for a payment that was still pending), and the orders' unique (customer, idempotency key) in the "
        "database handed them the orders their keys had placed. The store:redis row shows $0.00 charged more "
        "than once.",
        "Database: the orders' unique constraint, under a key store that is fast but outside the order's transaction.",
    ),
    Exercise(
        "legacy-gateway",
        "13. A gateway that ignores keys",
        (
            "Pay through the legacy gateway, which charges on every call, with the card whose answer is lost: "
            ".venv/bin/python -m checkout.client --path /api/lab/legacy-gateway/orders --card "
            '"4000 0000 0000 0259".',
            "Read what it printed: the first attempt got 503 (the gateway charged, but its answer was lost), the "
            "retry 201.",
            "Open the lab's reconciliation page (the “Reconciliation” button), or run .venv/bin/flask --app "
            "checkout gateway reconcile-report.",
            "Now pay the same way through the twin that retries without looking: --path "
            "/api/lab/legacy-gateway/no-lookup/orders, and open the reconciliation page again.",
        ),
        "Through the legacy gateway: one charge. Before charging again the retry asked the gateway for the "
        "charges of the order's reference and found the first one (the timeline shows answer_lost, resumed, "
        "looked_up, charged), and the report is clean (the command exits 0). Through the twin: the order is paid "
        "and charged twice; the report lists the extra charge as a charge without a paid order (the command "
        "exits 1), and the damage table's legacy-gateway:no-lookup row shows the price charged more than once.",
        "Downstream, when the gateway has no keys: look the charge up by reference before any retry, and "
        "reconcile the two ledgers.",
    ),
)


def as_markdown() -> str:
    """The exercises as the README shows them (a test keeps the README equal to this)."""
    parts = []
    for exercise in EXERCISES:
        steps = "\n".join(f"{number}. {step}" for number, step in enumerate(exercise.steps, start=1))
        parts.append(
            f"### {exercise.title}\n\n{steps}\n\n**Expect:** {exercise.expect}\n\n*Layer at work:* {exercise.layer}\n"
        )
    return "\n".join(parts)
