"""The nine mistakes, for the pages, the README and the tests: each twin's module with how to break it.

What a mistake is, and where its fix lives, is written once, in its module's
docstring ("THE MISTAKE: ...", "THE FIX in the safe code: ..."); this file
adds what a student does: the trigger, the steps, the commands, what to look
for. ``tests/test_mistakes.py`` checks that every file and function named in
a fix exists, and does every trigger against the twin and the safe endpoint.
"""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from checkout.i18n import N_
from checkout.lab.mistakes import (
    check_then_insert,
    key_after_operation,
    key_deleted_after_answer,
    memory_store,
    new_gateway_key_per_attempt,
    no_fingerprint,
    no_key,
    no_stored_result,
    unscoped_key,
)
from checkout.lab.mistakes.docstrings import Explanation, explanation
from checkout.lab.mistakes.twin import endpoint_of, path_of
from checkout.shop.placement import Pipeline

SAFE_ENDPOINT = "POST /api/orders"
CLIENT = ".venv/bin/python -m checkout.client"
LOST_ANSWER_CARD = "4000 0000 0000 0259"


ROOT = Path(__file__).resolve().parents[3]


def diff_of(real: object, wrong: object) -> str:
    """A unified diff of two definitions (functions, methods, classes), read from the source as it is."""

    def named(thing: object) -> str:
        where = Path(inspect.getsourcefile(thing) or "?").resolve()  # type: ignore[arg-type]
        return f"{where.relative_to(ROOT) if where.is_relative_to(ROOT) else where} ({thing.__qualname__})"  # type: ignore[attr-defined]

    before = inspect.getsource(real).splitlines()  # type: ignore[arg-type]
    after = inspect.getsource(wrong).splitlines()  # type: ignore[arg-type]
    lines = difflib.unified_diff(before, after, named(real), named(wrong), lineterm="", n=len(before) + len(after))
    return "\n".join(lines)


@dataclass(frozen=True)
class Fix:
    """A place in the safe code that does what the twin does not."""

    file: str
    function: str


@dataclass(frozen=True)
class Mistake:
    name: str
    module: ModuleType
    trigger: str  # the situation that breaks it, in a few words
    steps: tuple[str, ...]  # from the browser: this mistake's page has the form they use
    commands: str  # the same from a terminal (the retry client, or curl)
    look_for: str
    fixes: tuple[Fix, ...]
    test: str  # the test in tests/test_mistakes.py that measures its damage

    @property
    def explained(self) -> Explanation:
        """Its docstring's title, "THE MISTAKE" and "THE FIX" (docstrings.explanation)."""
        found = explanation(self.module.__doc__ or "")
        if found is None:
            raise ValueError(f"{self.module.__name__}: its docstring has no name, THE MISTAKE or THE FIX")
        return found

    @property
    def title(self) -> str:
        """The mistake in one line (its module docstring's first line, after the name)."""
        return self.explained.title

    @property
    def what(self) -> str:
        return self.explained.what

    @property
    def fix(self) -> str:
        return self.explained.fix

    @property
    def pipeline(self) -> Pipeline:
        """The shop's pipeline with this mistake's one part swapped."""
        found: Pipeline = self.module.PIPELINE
        return found

    @property
    def takes_key(self) -> bool:
        return self.pipeline.store is not None

    @property
    def path(self) -> str:
        return path_of(self.name)

    @property
    def endpoint(self) -> str:
        return endpoint_of(self.name)

    @property
    def url(self) -> str:
        return f"/api/lab/mistakes/{self.name}/orders"

    @property
    def file(self) -> str:
        return f"checkout/lab/mistakes/{self.module.__name__.rsplit('.', 1)[1]}.py"

    @property
    def source(self) -> str:
        return inspect.getsource(self.module)

    @property
    def diff(self) -> str:
        """The wrong part beside the real one it replaces, from the source as it is now."""
        return "\n".join(diff_of(real, wrong) for real, wrong in self.module.REPLACES)


def _client(name: str, *options: str) -> str:
    return f"{CLIENT} --path /api/lab/mistakes/{name}/orders " + " ".join(options)


_SAFE_TOO = N_("Then do the same with “Send to the safe POST /api/orders”, and compare the two rows of damage above.")

MISTAKES: tuple[Mistake, ...] = (
    Mistake(
        "no-key",
        no_key,
        N_("the same request sent twice (a retry)"),
        (
            N_("In the form below, keep card 4242 4242 4242 4242 and press “Send to the wrong twin”."),
            N_(
                "Press it again without changing anything: the same request again, as a retry after a timeout sends it."
            ),
            _SAFE_TOO,
            N_(
                "In the browser, the lab's unsafe checkout is the same mistake: pay there with 4000 0000 0000 0077 and "
                "press Pay again while the first press is still processing (exercise 6)."
            ),
        ),
        "# the gateway's answer is lost (503), and every retry is a new order and a new charge (lost again)\n"
        + _client("no-key", f'--card "{LOST_ANSWER_CARD}" --attempts 3')
        + f'\n# the safe endpoint, the same retries: one charge\n{CLIENT} --card "{LOST_ANSWER_CARD}"',
        N_(
            "Every answer from the twin has a new order id, and its row counts one order and one charge per request: "
            "the price charged more than once. The safe endpoint answers the retry with the same order, replayed "
            "(Idempotent-Replayed: true)."
        ),
        (Fix("checkout/shop/api.py", "create_order"), Fix("checkout/idempotency/engine.py", "_claim")),
        "test_no_key_charges_every_retry_again_and_the_safe_path_once",
    ),
    Mistake(
        "check-then-insert",
        check_then_insert,
        N_("a storm of racing duplicates"),
        (
            N_(
                "In the form below, set “Copies at once” to 10 and press “Send to the wrong twin”: ten copies of one "
                "request, with one key, sent at the same instant."
            ),
            N_(
                "If the storm made only one order, press it again with a new key: the gap between the look and the "
                "insert lasts milliseconds, and a storm does not always hit it. (The test holds the looks together, "
                "so that every one of them reads “new” before any inserts.)"
            ),
            _SAFE_TOO,
        ),
        "KEY=$(python3 -c 'import uuid; print(uuid.uuid4())')\n"
        'BODY=\'{"items":[{"sku":"MUG-01","quantity":1}],"email":"alice@example.com",'
        '"card_number":"4242 4242 4242 4242"}\'\n'
        "for i in $(seq 10); do\n"
        "  curl -s -o /dev/null -w '%{http_code}\\n' \\\n"
        "    http://127.0.0.1:5000/api/lab/mistakes/check-then-insert/orders \\\n"
        "    -H 'Authorization: Bearer demo-alice-token' -H \"Idempotency-Key: $KEY\" \\\n"
        "    -H 'Content-Type: application/json' -d \"$BODY\" &\n"
        "done; wait",
        N_(
            "Several answers 201 with different order ids, and the twin's row charged more than once. The safe "
            "endpoint: one 201, the others 409 (still in progress) or the same order replayed; one charge."
        ),
        (Fix("checkout/idempotency/engine.py", "_claim"), Fix("checkout/idempotency/models.py", "IdempotencyRecord")),
        "test_check_then_insert_lets_racing_duplicates_make_several_orders_and_the_safe_path_one",
    ),
    Mistake(
        "memory-store",
        memory_store,
        N_("four gunicorn workers"),
        (
            N_(
                "Serve the shop with four workers: make serve. (With make run there is one process, so one dict, and "
                "the twin looks right.)"
            ),
            N_(
                "In the form below, press “Send to the wrong twin”, then press it again four or five times without "
                "changing anything: each press is a retry with the same key."
            ),
            N_(
                "Watch the Worker column of your requests: every retry that lands on a worker that has not seen the "
                "key pays again."
            ),
            _SAFE_TOO,
        ),
        "# under make serve; run the same line several times (one key, one purchase)\n"
        "KEY=$(python3 -c 'import uuid; print(uuid.uuid4())')\n"
        + _client("memory-store", '--key "$KEY" --purchase "memory-$KEY"')
        + f'\n# the safe endpoint, the same runs\n{CLIENT} --key "$KEY" --purchase "memory-$KEY"',
        N_(
            "One order and one charge for every worker that answered (the Lab-Worker header of each answer names "
            "its process); a retry that lands on a worker that has seen the key is replayed. The safe endpoint: one "
            "order, whichever worker answers."
        ),
        (Fix("checkout/idempotency/models.py", "IdempotencyRecord"), Fix("checkout/idempotency/engine.py", "_claim")),
        "test_memory_store_pays_once_per_gunicorn_worker_and_the_safe_path_once",
    ),
    Mistake(
        "key-after-operation",
        key_after_operation,
        N_("a crash between the steps"),
        (
            N_(
                "In the form below, choose 4000 0000 0000 0259 and press “Send to the wrong twin”: the gateway "
                "charges, but its answer is lost before the twin writes the key (503), just as if the worker had died "
                "between the charge and the key."
            ),
            N_(
                "Press it again, with the same key: the twin has never heard of it, and pays again (a new payment, "
                "whose answer is lost too)."
            ),
            _SAFE_TOO,
        ),
        "# the first attempt charges and loses its answer before the key is written; the retry pays again\n"
        "# (a new payment, whose answer is lost again: two attempts, two charges)\n"
        + _client("key-after-operation", f'--card "{LOST_ANSWER_CARD}" --attempts 2')
        + "\n# the safe endpoint: the retry resumes the first order and finds its charge\n"
        + f'{CLIENT} --card "{LOST_ANSWER_CARD}"',
        N_(
            "The twin's row: two orders and two charges for one purchase, each order still pending though it "
            "was charged. The safe endpoint: one order, one charge; its retry resumed the order the first attempt "
            "made."
        ),
        (Fix("checkout/idempotency/engine.py", "_claim"), Fix("checkout/shop/placement.py", "PlaceOrder.phases")),
        "test_key_after_operation_pays_again_after_a_crash_between_the_steps_and_the_safe_path_resumes",
    ),
    Mistake(
        "key-deleted-after-answer",
        key_deleted_after_answer,
        N_("a late retry"),
        (
            N_("In the form below, press “Send to the wrong twin”: 201, an order."),
            N_(
                "Suppose that answer never reached the client: press it again, with the same key, as its retry "
                "after a timeout would."
            ),
            _SAFE_TOO,
        ),
        "KEY=$(python3 -c 'import uuid; print(uuid.uuid4())')\n"
        + _client("key-deleted-after-answer", '--key "$KEY" --purchase "late-$KEY"')
        + "\n# the answer was lost: the same command again, later\n"
        + _client("key-deleted-after-answer", '--key "$KEY" --purchase "late-$KEY"'),
        N_(
            "The twin answers the late retry with a second 201 and a new order id, charged again. The safe endpoint "
            "replays the first order: the same bytes, Idempotent-Replayed: true."
        ),
        (
            Fix("checkout/idempotency/engine.py", "_answer_existing"),
            Fix("checkout/idempotency/engine.py", "purge"),
            Fix("checkout/shop/models.py", "Order"),
        ),
        "test_key_deleted_after_answer_pays_a_late_retry_again_and_the_safe_path_replays",
    ),
    Mistake(
        "no-stored-result",
        no_stored_result,
        N_("a replay"),
        (
            N_("In the form below, press “Send to the wrong twin”: 201, an order."),
            N_("Press it again with the same key: the retry of a client whose first answer was lost."),
            _SAFE_TOO,
        ),
        "KEY=$(python3 -c 'import uuid; print(uuid.uuid4())')\n"
        + _client("no-stored-result", '--key "$KEY"')
        + "\n"
        + _client("no-stored-result", '--key "$KEY"')
        + "   # the replay: 200, and no order",
        N_(
            "The money is right (one order, one charge): the damage is the answer. The twin's replay is a 200 "
            "“already processed” with no order id and no Location, where the first answer was a 201. The safe "
            "replay is the first answer, byte for byte, with Idempotent-Replayed: true."
        ),
        (Fix("checkout/idempotency/engine.py", "_answer_existing"), Fix("checkout/shop/responders.py", "ApiResponder")),
        "test_no_stored_result_replays_a_generic_answer_and_the_safe_path_the_first_one",
    ),
    Mistake(
        "unscoped-key",
        unscoped_key,
        N_("another customer with the same key string"),
        (
            N_("In the form below, as Alice, press “Send to the wrong twin”."),
            N_("Switch the customer to Bob, keep the key, and press it again."),
            _SAFE_TOO,
        ),
        "KEY=$(python3 -c 'import uuid; print(uuid.uuid4())')\n"
        + _client("unscoped-key", '--key "$KEY"')
        + "\n"
        + _client("unscoped-key", '--key "$KEY" --token demo-bob-token --email bob@example.com')
        + "   # Bob",
        N_(
            "Bob's answer from the twin is Alice's order: her order id, her email, her card's last four digits; "
            "Bob's own purchase was never placed. From the safe endpoint Bob gets an order of his own, and nothing "
            "of Alice's."
        ),
        (Fix("checkout/idempotency/types.py", "Scope"), Fix("checkout/idempotency/models.py", "IdempotencyRecord")),
        "test_unscoped_key_shows_another_customer_the_first_ones_order_and_the_safe_path_does_not",
    ),
    Mistake(
        "no-fingerprint",
        no_fingerprint,
        N_("a changed body"),
        (
            N_("In the form below, with 2 mugs, press “Send to the wrong twin”."),
            N_("Change Mugs to 5, keep the key, and press it again."),
            _SAFE_TOO,
        ),
        "KEY=$(python3 -c 'import uuid; print(uuid.uuid4())')\n"
        + _client("no-fingerprint", '--key "$KEY" --quantity 2')
        + "\n"
        + _client("no-fingerprint", '--key "$KEY" --quantity 5')
        + "   # another body, the same key",
        N_(
            "The twin answers the five mugs with 201 and the first order, of two, as if it were their answer: the "
            "five were never ordered, and the client believes they were. The safe endpoint answers 422 "
            "idempotency-key-reused and keeps the first answer untouched."
        ),
        (
            Fix("checkout/shop/placement.py", "keyed_fingerprint"),
            Fix("checkout/idempotency/fingerprint.py", "fingerprint"),
            Fix("checkout/idempotency/engine.py", "_answer_existing"),
        ),
        "test_no_fingerprint_answers_a_changed_body_with_the_first_order_and_the_safe_path_refuses_it",
    ),
    Mistake(
        "new-gateway-key-per-attempt",
        new_gateway_key_per_attempt,
        N_("a lost gateway answer and a retry"),
        (
            N_(
                "In the form below, choose 4000 0000 0000 0259 and press “Send to the wrong twin”: 503, the gateway's "
                "answer was lost, and the charge exists."
            ),
            N_(
                "Press it again with the same key: the twin asks the gateway under a new key, which charges again (and "
                "loses this answer too: for the gateway every new key is a first call)."
            ),
            _SAFE_TOO,
        ),
        "# every attempt is a new charge under a new gateway key, and every answer is lost again\n"
        + _client("new-gateway-key-per-attempt", f'--card "{LOST_ANSWER_CARD}" --attempts 3')
        + "\n# the safe endpoint: 503, then 201 with the charge the first attempt made\n"
        + f'{CLIENT} --card "{LOST_ANSWER_CARD}"',
        N_(
            "The twin's row: one purchase, as many charges as attempts. The safe endpoint: one charge, found again "
            "under the order's own gateway key by the retry."
        ),
        (
            Fix("checkout/shop/placement.py", "from_the_order"),
            Fix("checkout/shop/placement.py", "PlaceOrder.charge"),
            Fix("checkout/gateway/client.py", "Gateway.charge"),
        ),
        "test_new_gateway_key_per_attempt_charges_every_retry_after_a_lost_answer_and_the_safe_path_once",
    ),
)

BY_NAME = {mistake.name: mistake for mistake in MISTAKES}


def as_markdown() -> str:
    """The README's table of the nine, word for word as the pages say it (tests/test_mistakes.py checks it)."""
    rows = [
        "| mistake | what it does wrong | its trigger | where the fix lives |",
        "| --- | --- | --- | --- |",
    ]
    for mistake in MISTAKES:
        fixes = "; ".join(f"`{fix.file}` (`{fix.function}`)" for fix in mistake.fixes)
        rows.append(f"| [`{mistake.name}`]({mistake.file}) | {mistake.title} | {mistake.trigger} | {fixes} |")
    return "\n".join(rows)
