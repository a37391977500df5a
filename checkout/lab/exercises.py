"""The workshop's exercises. /lab/exercises renders them; the README's workshop
section says the same; tests/browser/test_exercises.py does each one."""

from __future__ import annotations

from dataclasses import dataclass

from checkout.i18n import N_


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
        N_("1. Double-click Pay"),
        (
            N_(
                "Add something to the cart and open the checkout. Pay with the slow card 4000 0000 0000 0077, "
                "double-clicking the Pay button: it turns into “Processing payment…” and the second click sends "
                "nothing. That is the first layer, the button."
            ),
            N_("Now open the lab and press “Turn the Pay button guard off (this browser)”."),
            N_(
                "Add something again, pay with 4000 0000 0000 0077, and press Pay again a moment later, while the "
                "first press is still processing (a quick double-click is not enough: the browser replaces the first "
                "submit with the second before it leaves, and only one reaches the server)."
            ),
            N_("Open the lab: your latest payment's timeline leads the page."),
        ),
        N_(
            "Two payments reached the server this time, and still one order and one succeeded charge: the timeline "
            "shows a conflict (the second click arrived while the first was running) or a replay, and the counters "
            "count it. The damage table shows $0.00 charged more than once."
        ),
        N_("Client (the disabled button); with it off, the server (the atomic claim of the key)."),
    ),
    Exercise(
        "lost-answer",
        N_("2. The answer is lost"),
        (
            N_("Pay with 4000 0000 0000 0259: the gateway charges, but its answer never reaches the shop."),
            N_("Read the page: “we could not confirm your payment yet”. Type the card again and press Pay."),
            N_("Open the lab: the timeline of your latest payment."),
        ),
        N_(
            "The second Pay shows the paid order. The lab shows one charge, made by the first attempt; the "
            "timeline shows answer_lost, released, resumed, charged."
        ),
        N_("Downstream (the gateway is idempotent on a key derived from the order) and recovery points."),
    ),
    Exercise(
        "gateway-down",
        N_("3. The gateway is down"),
        (
            N_("Pay with 4000 0000 0000 0119: the gateway is unavailable on the first call."),
            N_("Check the lab: your payment is in progress at order_created, with no charge and nobody holding it."),
            N_("Type the card again and press Pay."),
        ),
        N_(
            "The first Pay charges nothing and asks you to try again; the second Pay shows the paid order, with one "
            "charge."
        ),
        N_("Recovery: the lease is released at once, so the retry resumes without waiting."),
    ),
    Exercise(
        "racing-tabs",
        N_("4. Racing tabs"),
        (
            N_(
                "Open the checkout in two tabs (the same cart renders the same key in both: it is made once, in the "
                "database)."
            ),
            N_("Fill both with 4000 0000 0000 0077; press Pay in the first tab, then at once in the second."),
        ),
        N_("Both tabs end on the same order; the second says it was already placed and charged once. One charge."),
        N_("Server: the second request finds the key in progress and waits for the first's answer."),
    ),
    Exercise(
        "killed-worker",
        N_("5. A worker dies mid-payment"),
        (
            N_(
                "Serve the shop with several workers: make serve (not make run: with one worker, killing it kills "
                "the shop)."
            ),
            N_(
                "Add something to the cart, open the checkout, and pay with the very slow card "
                "4000 0000 0000 0093 (it takes 20 seconds; it charges at 10). Then open the lab in another tab "
                "(leave the payment's tab alone, or the browser may resend the payment by itself)."
            ),
            N_(
                "In the lab, your latest payment shows the worker holding it and the command to kill it. Press "
                "“Kill worker …” (or run the kill -9 command shown) within those 20 seconds."
            ),
            N_(
                "Never retry. Wait for the lease to run out (30 seconds; the lab shows how long), then press "
                "“Run reconcile now”."
            ),
        ),
        N_(
            "Reconcile fences the gateway key and finishes the payment: killed after the gateway charged (after 10 "
            "seconds), the order is paid with exactly one charge; killed before, it ends as failed with no charge, "
            "and no late charge can land under its key. The damage table stays at $0.00 charged more than once."
        ),
        N_("Recovery: leases, recovery points, fencing, and reconcile."),
    ),
    Exercise(
        "unsafe",
        N_("6. The unsafe path"),
        (
            N_("Open the lab's unsafe checkout (no key, no constraint, no button guard)."),
            N_(
                "Pay with 4000 0000 0000 0077 and press Pay again a moment later, while the first press is still "
                "processing."
            ),
            N_("Open the lab and compare the damage table's unsafe row with the safe one."),
        ),
        N_(
            "Two orders and two charges for one purchase: the lab shows the price charged more than once. The safe "
            "checkout never shows more than zero."
        ),
        N_("None: this is the bug the other layers prevent."),
    ),
    Exercise(
        "double-refund",
        N_("7. Refund twice"),
        (
            N_("Pay for something with the slow card 4000 0000 0000 0077 (a refund of its charge is slow too)."),
            N_(
                "On the order page, type 5.00 in the refund form, press Refund, and press it again a moment later, "
                "while the first is still being processed."
            ),
            N_("Open the lab: the refunds table."),
        ),
        N_(
            "The second Refund shows the same order with “You already asked for this refund”: $5.00 was refunded "
            "once. The refund form carries a key of its own; its endpoint is a second scope for keys."
        ),
        N_("Server: the refund's own idempotency key; database: never more refunded than charged."),
    ),
    Exercise(
        "webhook-thrice",
        N_("8. A webhook delivered three times"),
        (
            N_("Pay with 4000 0000 0000 0259 (the gateway charges; its answer is lost) and leave that page alone."),
            N_("In the lab, find the gateway's charge.succeeded event. Press its Redeliver button three times."),
        ),
        N_(
            "The event is applied once: the order is paid once, one confirmation email is written, and the lab "
            "counts the deliveries it ignored as duplicates. The event id is the webhook's idempotency key."
        ),
        N_("Webhook receiver: the event id claimed in the transaction that applies it."),
    ),
    Exercise(
        "relay-crash",
        N_("9. The mail relay dies between sending and marking"),
        (
            N_(
                "Start the shop with the background mail relay off, so that it does not send the email first: "
                "CHECKOUT_OUTBOX_RELAY=off make run. Pay for something with 4242 4242 4242 4242: the payment writes "
                "its confirmation email into the outbox, in the same transaction."
            ),
            N_(
                "In a second terminal, run .venv/bin/flask --app checkout outbox relay --crash-after-send: the relay "
                "sends the confirmation, then dies before it can mark it sent."
            ),
            N_(
                "Open the lab's mailbox (the “Mailbox” button): one copy received, and the outbox still says the "
                "message is not sent, held by the relay that died."
            ),
            N_(
                "Once that relay's claim has run out (20 seconds after the crash; until then the command says how long "
                "to wait), run .venv/bin/flask --app checkout outbox relay."
            ),
            N_("Open the mailbox again."),
        ),
        N_(
            "The relay sent the confirmation again, with the same Message-ID: the mailbox shows two copies of one "
            "message and counts 1 duplicate, the copy a receiver drops by its Message-ID. The outbox marks the "
            "message sent once, after 2 attempts."
        ),
        N_(
            "Downstream, at least once: the email is written in the payment's transaction, the relay marks it sent "
            "only after sending it, and a Message-ID derived from the outbox row lets the receiver keep one copy."
        ),
    ),
    Exercise(
        "last-item",
        N_("10. Two shoppers, one last lamp"),
        (
            N_("Open the shop in two browsers (or a normal and a private window): two shoppers, two carts."),
            N_("In both, add the Last-One Lamp (there is one), open the checkout, and fill in 4000 0000 0000 0077."),
            N_("Press Pay in the first, then at once in the second."),
        ),
        N_(
            "One shopper gets the lamp, paid once; the other sees that it sold out while they were paying, and "
            "nothing is charged. The lab's stock table stays balanced."
        ),
        N_("Database: a conditional UPDATE that can never take stock below zero, in the order's own transaction."),
    ),
    Exercise(
        "webhook-alone",
        N_("11. A lost answer, finished by the webhook alone"),
        (
            N_(
                "Pay with 4000 0000 0000 0259: the page says it could not confirm the payment. Do not press Pay "
                "again: close the page."
            ),
            N_(
                "Wait a few seconds (the gateway's relay delivers its events every second), or press “Deliver due "
                "events now” in the lab."
            ),
            N_("Open Orders."),
        ),
        N_(
            "The order is paid, with one charge, though you never retried: the gateway's charge.succeeded event "
            "finished it. If you do press Pay again later, you land on the same order."
        ),
        N_("Webhook receiver, and the order's conditional move from pending to paid (whoever comes first)."),
    ),
    Exercise(
        "redis-forgets",
        N_("12. Redis forgets a key"),
        (
            N_(
                "Serve the shop with its Redis store on: CHECKOUT_REDIS_URL=redis://127.0.0.1:6379/0 make run. The "
                "lab's header says whether Redis answers (“Redis store: answering”)."
            ),
            N_(
                "In a second terminal, start 300 payments through the Redis store: make mass "
                'MASS_ARGS="--path /api/lab/stores/redis/orders --payments 300".'
            ),
            N_(
                "While it runs, open the lab's Redis store page (the “Redis store” button) and press “Make Redis "
                "forget every key of this store”."
            ),
            N_("When the run ends, read its result, then the damage table's store:redis row in the lab."),
        ),
        N_(
            "The run ends exact: every payment charged once, though Redis forgot the records of the payments in "
            "flight. Their retries claimed their keys again (a key's timeline shows claimed twice, and order_found "
            "for a payment that was still pending), and the orders' unique (customer, idempotency key) in the "
            "database handed them the orders their keys had placed. The store:redis row shows $0.00 charged more "
            "than once."
        ),
        N_(
            "Database: the orders' unique constraint, under a key store that is fast but outside the order's "
            "transaction."
        ),
    ),
    Exercise(
        "legacy-gateway",
        N_("13. A gateway that ignores keys"),
        (
            N_(
                "Pay through the legacy gateway, which charges on every call, with the card whose answer is lost: "
                ".venv/bin/python -m checkout.client --path /api/lab/legacy-gateway/orders --card "
                '"4000 0000 0000 0259".'
            ),
            N_(
                "Read what it printed: the first attempt got 503 (the gateway charged, but its answer was lost), the "
                "retry 201."
            ),
            N_(
                "Open the lab's reconciliation page (the “Reconciliation” button), or run .venv/bin/flask --app "
                "checkout gateway reconcile-report."
            ),
            N_(
                "Now pay the same way through the twin that retries without looking: --path "
                "/api/lab/legacy-gateway/no-lookup/orders, and open the reconciliation page again."
            ),
        ),
        N_(
            "Through the legacy gateway: one charge. Before charging again the retry asked the gateway for the "
            "charges of the order's reference and found the first one (the timeline shows answer_lost, resumed, "
            "looked_up, charged), and the report is clean (the command exits 0). Through the twin: the order is paid "
            "and charged twice; the report lists the extra charge as a charge without a paid order (the command "
            "exits 1), and the damage table's legacy-gateway:no-lookup row shows the price charged more than once."
        ),
        N_(
            "Downstream, when the gateway has no keys: look the charge up by reference before any retry, and "
            "reconcile the two ledgers."
        ),
    ),
    Exercise(
        "proxy-resends",
        N_("14. The proxy resends"),
        (
            N_(
                "Serve the shop behind nginx: make proxy (stop make run first: the proxy takes its address, "
                "http://127.0.0.1:5000; without nginx, make proxy says how to install it). Two app servers, app-1 "
                "and app-2, share one database. nginx waits 1 second for an answer, then sends the same request to "
                "the other server, a POST too (proxy_next_upstream error timeout non_idempotent). Its terminal shows "
                "what nginx and each server did."
            ),
            N_(
                "Add something to the cart, open the checkout, and pay with the slow card 4000 0000 0000 0077 (it "
                "takes 3 seconds)."
            ),
            N_(
                "Two seconds later the browser shows nginx's own page, “504 Gateway Time-out”: after a second "
                "without an answer nginx sent the same POST to the other server, and after another second it gave up "
                "on that one too."
            ),
            N_(
                "Open the lab in another tab: your latest payment's timeline names the server (app-1 or app-2) beside "
                "the worker of each step."
            ),
            N_(
                "Back in the payment's tab, press the browser's Back button: the checkout says this cart is already "
                "paid. Press Pay again (type the card if its field is empty)."
            ),
            N_(
                "Now the unsafe checkout, behind the same proxy: add something to the cart, open the lab's unsafe "
                "checkout, and pay with 4000 0000 0000 0077, pressing Pay once. Then open the lab and compare the "
                "damage table's unsafe row with the safe one."
            ),
        ),
        N_(
            "Both attempts are in the timeline: received on one server, which claimed the key and called the "
            "gateway; a second later received on the other server, with a conflict: it found the payment still at "
            "the gateway and waited for it. The first completed, 3 seconds in, and the waiting one then replayed "
            "that answer to a proxy that had stopped listening: the browser had its 504 already. nginx's line in the "
            'terminal says the same: statuses="504, 504", one for each server. One order, one charge; Pay after the '
            "504 shows that order, placed already and charged once. The unsafe checkout also answered one press with "
            "a 504, and made two orders and two charges, one on each server: its row shows the price charged more "
            "than once."
        ),
        N_(
            "Server: the key travels in every copy the proxy sends, and whichever server gets one finds the same "
            "record in the shared database. A POST without a key must never be resent: "
            "deploy/nginx/checkout.conf.template shows the safe setting beside this one."
        ),
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
