"""The mutation check: turn off one layer of the defence at a time, and see which tests notice.

A test that claims to prove a layer of the defence ("a double click charges
once", "a reused key with another body is refused") proves it only if it FAILS
when that layer is gone. A defence test that still passes with the defence
removed proves nothing about it: it passes because of some other layer, or
because the situation it sets up never reaches the layer at all (a
``dblclick()`` that sends one POST never tests the server's deduplication).

So, for each layer in ``MUTATIONS`` below, this script:

1. copies the project to a temporary folder (never touching the real files),
2. applies the layer's exact ``old -> new`` text replacements to the copy (it
   refuses to run if a pattern no longer occurs exactly once: the table must
   follow the code),
3. runs that layer's chosen tests against the mutated copy (the whole set, no
   ``-x``), reads which failed from pytest's JUnit XML,
4. puts the file back, and goes on with the next layer. Two layers are judged at once (``--jobs``), each in a
   copy of its own, with a Redis database of its own for the Redis store's tests.

A layer is *caught* when at least one browser test (tests/browser/) AND at
least one other test (API, engine, unit) fail with it removed. The script
prints a table and exits 1 if any layer is not caught, 2 if it cannot judge
(a pattern or a test is missing, or a chosen test fails on the unmutated tree).

    .venv/bin/python scripts/mutants.py                  # every layer (make mutants)
    .venv/bin/python scripts/mutants.py --list           # the layers, their mutations and tests
    .venv/bin/python scripts/mutants.py --layer fingerprint-check
    .venv/bin/python scripts/mutants.py --layer atomic-claim --tests tests/browser/test_x.py::test_y

Set TEST_DATABASE_URL to run the tests on PostgreSQL, as with pytest.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROWSER_TESTS = "tests/browser/"
COPY_IGNORES = shutil.ignore_patterns(
    ".venv",
    ".qa-venv",
    ".git",
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "instance",
    "test-results",
)
PYTEST_TIMEOUT_SECONDS = 900
MESSAGE_WIDTH = 120


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (which must occur exactly once in ``path``) with ``new``."""

    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Mutation:
    layer: str
    removes: str  # what the mutated code no longer does, in one line
    why: str  # why this mutation is the honest way to remove the layer
    edits: tuple[Edit, ...]
    tests: tuple[str, ...]  # pytest node ids: the tests that claim to prove this layer


# --- the table: one layer of the defence per row ---------------------------------------
MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        layer="button-guard",
        removes="checkout.js no longer disables Pay on submit",
        why="Layer 1, the client. The label still changes, so only a test that presses twice can tell.",
        edits=(Edit("static/checkout.js", "button.disabled = true;", "/* mutant: Pay stays enabled */"),),
        tests=(
            # The QA folder's tests (qa/), Python and TypeScript, against a served shop of the mutated copy.
            "tests/browser/test_qa_folder.py::test_the_python_qa_tests_copied_into_an_empty_folder_all_pass_against_a_shop_with_its_lab_on",
            "tests/browser/test_qa_folder.py::test_the_typescript_qa_tests_all_pass_against_a_shop_with_its_lab_on",
            "tests/test_layers.py::test_submitting_the_checkout_form_disables_the_pay_button",
        ),
    ),
    Mutation(
        layer="atomic-claim",
        removes="idempotency records are no longer unique on (customer, endpoint, key)",
        why=(
            "The INSERT ... ON CONFLICT DO NOTHING decides a race only because of this unique index: without it"
            " every request that read 'no record' claims the key too. The read before the claim still answers"
            " requests that arrive after a claim, so only two requests that look at the same instant show the"
            " difference: the tests hold their first looks together (tests.helpers.SameInstantLooks). The orders'"
            " unique (customer, key) still stops a second order, so the loser is told 'still processing' at once"
            " instead of waiting for the winner's answer: that answer is what the tests assert."
        ),
        edits=(
            Edit(
                "checkout/idempotency/models.py",
                '        sa.UniqueConstraint("customer", "endpoint", "key"),'
                "  # the database itself refuses a second claim\n",
                "",
            ),
        ),
        tests=(
            "tests/browser/test_layers.py::test_two_tabs_that_pay_at_the_same_instant_both_end_on_the_one_order",
            "tests/test_layers.py::test_two_requests_that_look_at_the_same_instant_pay_once_and_the_loser_replays",
        ),
    ),
    Mutation(
        layer="fingerprint-check",
        removes="a different body under a used key counts as the same request",
        why="The stored HMAC is still computed; the comparison says yes to anything.",
        edits=(
            Edit(
                "checkout/idempotency/engine.py",
                "    return hmac.compare_digest(stored, offered)\n",
                "    return True  # mutant: any request matches\n",
            ),
        ),
        tests=(
            "tests/browser/test_layers.py::test_the_same_payment_key_with_another_email_gets_the_mismatch_page",
            "tests/test_api_orders.py::test_same_key_different_payload_is_422_and_leaves_the_record_untouched",
            "tests/test_layers.py::test_a_resubmitted_checkout_form_with_another_card_is_refused_and_charges_nothing",
            # The Redis store runs the same engine: the same one comparison guards its records.
            "tests/test_redis_store.py::test_the_same_key_with_another_body_is_422_and_the_record_is_untouched",
        ),
    ),
    Mutation(
        layer="orders-unique",
        removes="orders are no longer unique on (customer, key) nor on (cart, cart version)",
        why=(
            "Tests build their schema with db.create_all() from the models, so the constraints leave the test"
            " database too. They matter when the key's record cannot answer: it was purged, or another key"
            " pays the same cart version (a forged form)."
        ),
        edits=(
            Edit(
                "checkout/shop/models.py",
                '        sa.UniqueConstraint("customer_id", "idempotency_key"),\n'
                '        sa.UniqueConstraint("cart_id", "cart_version"),\n',
                "",
            ),
        ),
        tests=(
            "tests/browser/test_layers.py::test_a_second_form_for_the_same_cart_with_another_key_ends_on_the_same_order",
            "tests/test_configuration_and_commands.py::test_a_retry_after_the_purge_gets_the_existing_order_not_a_second_one",
            "tests/test_one_payment_per_cart.py::test_two_different_keys_for_one_cart_version_end_in_one_order",
        ),
    ),
    Mutation(
        layer="stable-gateway-key",
        removes="every gateway call gets a new gateway key instead of the order's",
        why=(
            "A resumed payment then asks the gateway for a new charge instead of the one the lost answer made."
            " (The mock gateway's one-succeeded-charge-per-reference index still refuses it: the retry errors.)"
        ),
        edits=(
            Edit(
                "checkout/shop/payment.py",
                "    return GatewayCall(order.gateway_key, order.public_id)\n",
                '    return GatewayCall(gateway_key_for(public_id("try")), order.public_id)'
                "  # mutant: a new key per attempt\n",
            ),
        ),
        tests=(
            "tests/browser/test_checkout_browser.py::test_a_lost_gateway_answer_shows_try_again_and_the_second_pay_shows_the_paid_order",
            "tests/test_failures.py::test_a_lost_gateway_answer_is_503_and_the_retry_finds_the_charge_instead_of_charging_again",
            "tests/test_failures.py::test_gateway_unavailable_is_503_nothing_stored_and_the_retry_resumes",
        ),
    ),
    Mutation(
        layer="lease-owner-check",
        removes="the owner-checked UPDATE matches the record whoever holds its lease",
        why=(
            "The owner token is still passed and ignored; the UPDATE keeps its state check, so only a lost owner"
            " that writes while the new owner is still at work shows the difference."
        ),
        edits=(Edit("checkout/idempotency/store.py", ', c.locked_by == sa.bindparam("_owner")', ""),),
        tests=(
            "tests/browser/test_layers.py::test_a_payment_whose_lease_was_taken_over_mid_charge_writes_nothing",
            "tests/test_failures.py::test_a_worker_whose_lease_was_taken_over_cannot_write",
            "tests/test_layers.py::test_an_api_payment_whose_lease_was_taken_over_mid_charge_writes_nothing",
        ),
    ),
)


# --- checking that the table still matches the code -----------------------------------


class TableOutOfDate(Exception):
    """A pattern or a test of the table no longer matches the code."""


def check_edits(mutation: Mutation, root: Path) -> None:
    for edit in mutation.edits:
        path = root / edit.path
        if not path.is_file():
            raise TableOutOfDate(f"{mutation.layer}: {edit.path} does not exist")
        found = path.read_text().count(edit.old)
        if found != 1:
            raise TableOutOfDate(
                f"{mutation.layer}: in {edit.path} the pattern {edit.old!r} occurs {found} times, not exactly once.\n"
                "The code changed: update this layer's row of MUTATIONS in scripts/mutants.py."
            )


def check_test_ids(layer: str, tests: Sequence[str], root: Path) -> None:
    for test in tests:
        path, _, name = test.partition("::")
        function = name.split("[", 1)[0]
        source = root / path
        if not source.is_file() or not re.search(rf"^def {re.escape(function)}\(", source.read_text(), re.MULTILINE):
            raise TableOutOfDate(f"{layer}: the test {test} does not exist (renamed or moved?)")


# --- running pytest on a copy ------------------------------------------------------------


@dataclass
class Results:
    """What one pytest run said about each chosen test."""

    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> passed / failed / error / skipped
    messages: dict[str, str] = field(default_factory=dict)  # test id -> the first line of its failure
    seconds: float = 0.0
    summary: str = ""

    def message(self, test: str) -> str:
        return next((m for name, m in self.messages.items() if name == test or name.startswith(f"{test}[")), "")

    def outcome(self, test: str) -> str:
        """A test's outcome; for a parametrized test named without its parameters, the worst of its cases."""
        cases = [o for name, o in self.outcomes.items() if name == test or name.startswith(f"{test}[")]
        for worst in ("failed", "error", "passed", "skipped"):
            if worst in cases:
                return worst
        return "not run"

    def with_outcome(self, outcome: str, tests: Sequence[str]) -> list[str]:
        return [test for test in tests if self.outcome(test) == outcome]


JUNIT_OUTCOMES = (("failure", "failed"), ("error", "error"), ("skipped", "skipped"))


def test_id(case: ET.Element) -> str:
    """The pytest node id of a JUnit test case (classname tests.browser.test_x, name test_y[param])."""
    module = case.get("classname", "")
    return f"{module.replace('.', '/')}.py::{case.get('name', '')}"


def read_junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Each test's outcome, and the first line of each failure's message."""
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    if not path.exists():
        return outcomes, messages
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {child.tag: child for child in case}
        outcome = next((name for tag, name in JUNIT_OUTCOMES if tag in tags), "passed")
        outcomes[test_id(case)] = outcome
        if outcome in ("failed", "error"):
            problem = tags.get("failure", tags.get("error"))
            text = (problem.get("message") or problem.text or "") if problem is not None else ""
            messages[test_id(case)] = text.strip().splitlines()[0] if text.strip() else ""
    return outcomes, messages


def pytest_env(copy: Path, job: int = 0) -> dict[str, str]:
    """Import the copy's code, not the editable install's (the venv may point at another tree). Each job's
    Redis tests flush a database of their own: the next index after the last job's."""
    paths = [str(copy), *filter(None, [os.environ.get("PYTHONPATH")])]
    redis = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/12")
    base, _, index = redis.rpartition("/")
    if index.isdigit():
        redis = f"{base}/{int(index) + job}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONDONTWRITEBYTECODE": "1"}
    return {**env, "TEST_REDIS_URL": redis}


def check_imports_the_copy(copy: Path) -> None:
    where = subprocess.run(
        [sys.executable, "-c", "import checkout; print(checkout.__file__)"],
        cwd=copy,
        env=pytest_env(copy),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(copy.resolve()):
        raise SystemExit(f"the tests would import {where}, not the copy in {copy}: fix PYTHONPATH")


def run_pytest(copy: Path, tests: Sequence[str], label: str, *, verbose: bool, job: int = 0) -> Results:
    report = copy / f"junit-{label}.xml"
    report.unlink(missing_ok=True)
    command = [
        sys.executable,
        "-m",
        "pytest",
        *tests,
        "-q",
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
        f"--junitxml={report}",
    ]
    started = time.monotonic()
    finished = subprocess.run(
        command,
        cwd=copy,
        env=pytest_env(copy, job),
        capture_output=not verbose,
        text=True,
        timeout=PYTEST_TIMEOUT_SECONDS,
        check=False,
    )
    lines = (finished.stdout or "").strip().splitlines()
    outcomes, messages = read_junit(report)
    summary = lines[-1] if lines else f"exit {finished.returncode}"
    return Results(outcomes, messages, time.monotonic() - started, summary)


@contextmanager
def project_copy() -> Iterator[Path]:
    """The project in a temporary folder (without .venv, .git, caches), removed afterwards whatever happens."""
    parent = Path(tempfile.mkdtemp(prefix="checkout-mutants-"))
    try:
        copy = parent / "checkout"
        shutil.copytree(ROOT, copy, ignore=COPY_IGNORES, symlinks=True)
        yield copy
    finally:
        shutil.rmtree(parent, ignore_errors=True)


@contextmanager
def mutated(copy: Path, mutation: Mutation) -> Iterator[None]:
    """Apply the mutation's edits to the copy; put the files back afterwards, even on Ctrl-C."""
    originals = {edit.path: (copy / edit.path).read_text() for edit in mutation.edits}
    try:
        for edit in mutation.edits:
            path = copy / edit.path
            path.write_text(path.read_text().replace(edit.old, edit.new, 1))
        yield
    finally:
        for relative, text in originals.items():
            (copy / relative).write_text(text)


# --- judging and printing ------------------------------------------------------------------


def is_browser(test: str) -> bool:
    return test.startswith(BROWSER_TESTS)


def short(test: str) -> str:
    return test.rsplit("::", 1)[-1]


@dataclass(frozen=True)
class Verdict:
    mutation: Mutation
    tests: tuple[str, ...]
    results: Results

    @property
    def failed(self) -> list[str]:
        return self.results.with_outcome("failed", self.tests)

    @property
    def browser_failed(self) -> list[str]:
        return [t for t in self.failed if is_browser(t)]

    @property
    def other_failed(self) -> list[str]:
        return [t for t in self.failed if not is_browser(t)]

    @property
    def not_failed(self) -> list[str]:
        """Chosen tests that did not fail with the layer removed: each says what it did instead."""
        return [f"{short(t)} ({self.results.outcome(t)})" for t in self.tests if t not in self.failed]

    @property
    def caught(self) -> bool:
        return bool(self.browser_failed) and bool(self.other_failed)


def render_table(header: Sequence[str], rows: Sequence[Sequence[list[str]]]) -> str:
    """A plain-text table whose cells may hold several lines."""
    widths = [len(h) for h in header]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max([widths[index], *(len(line) for line in cell)])

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(text.ljust(width) for text, width in zip(cells, widths, strict=True)) + " |"

    out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    for row in rows:
        height = max(len(cell) for cell in row)
        for index in range(height):
            out.append(line([cell[index] if index < len(cell) else "" for cell in row]))
    return "\n".join(out)


def verdict_table(verdicts: Sequence[Verdict]) -> str:
    rows = [
        [
            [v.mutation.layer],
            [v.mutation.removes],
            [short(t) for t in v.browser_failed] or ["(none)"],
            [short(t) for t in v.other_failed] or ["(none)"],
            ["yes" if v.caught else "NO"],
        ]
        for v in verdicts
    ]
    return render_table(["layer", "mutation", "failed: browser", "failed: API or other", "caught?"], rows)


def print_list(mutations: Sequence[Mutation]) -> None:
    for mutation in mutations:
        print(f"{mutation.layer}: {mutation.removes}")
        print(f"  why: {mutation.why}")
        for edit in mutation.edits:
            print(f"  {edit.path}: {edit.old!r} -> {edit.new!r}")
        for test in mutation.tests:
            print(f"  test: {test}")
        print()


# --- the run ----------------------------------------------------------------------------------


def baseline(copy: Path, tests: Sequence[str], *, verbose: bool) -> bool:
    """The chosen tests must pass on the unmutated tree, or a failure under a mutation means nothing."""
    results = run_pytest(copy, tests, "baseline", verbose=verbose)
    bad = [f"{t} ({results.outcome(t)})" for t in tests if results.outcome(t) != "passed"]
    print(f"baseline (no mutation): {results.summary} in {results.seconds:.1f} s")
    for test in bad:
        print(f"  did not pass unmutated: {test}")
    return not bad


def run(
    mutations: Sequence[Mutation], override_tests: Sequence[str], *, with_baseline: bool, verbose: bool, jobs: int = 1
) -> int:
    started = time.monotonic()
    with ExitStack() as stack:
        copies: queue.Queue[tuple[int, Path]] = queue.Queue()
        for job in range(max(1, min(jobs, len(mutations)))):
            copy = stack.enter_context(project_copy())
            check_imports_the_copy(copy)
            copies.put((job, copy))
        everything = list(dict.fromkeys(override_tests or [t for m in mutations for t in m.tests]))
        if with_baseline and not baseline(copies.queue[0][1], everything, verbose=verbose):
            print("Some chosen tests fail without any mutation: fix them first; nothing can be judged.")
            return 2

        def judge(mutation: Mutation) -> Verdict:
            """One layer removed in a copy no other job is using at the time."""
            job, copy = copies.get()
            try:
                tests = tuple(override_tests) or mutation.tests
                with mutated(copy, mutation):
                    results = run_pytest(copy, tests, mutation.layer, verbose=verbose, job=job)
            finally:
                copies.put((job, copy))
            print(f"{mutation.layer}: {results.summary} in {results.seconds:.1f} s", flush=True)
            return Verdict(mutation, tests, results)

        # Each layer's tests wait on slow cards and servers much of the time: two layers at once fill the cores.
        with ThreadPoolExecutor(max_workers=copies.qsize()) as pool:
            verdicts = list(pool.map(judge, mutations))
    print()
    print(verdict_table(verdicts))
    print("\nwhy they failed (the first line of each failure):")
    for verdict in verdicts:
        for test in verdict.failed:
            print(f"  {verdict.mutation.layer}: {short(test)}: {verdict.results.message(test)[:MESSAGE_WIDTH]}")
    for verdict in verdicts:
        if verdict.not_failed:
            print(f"{verdict.mutation.layer}: did not fail with the layer removed: {', '.join(verdict.not_failed)}")
    missed = [v.mutation.layer for v in verdicts if not v.caught]
    print(f"\ntotal time: {time.monotonic() - started:.1f} s")
    if missed:
        print(f"NOT CAUGHT by a browser test and a non-browser test: {', '.join(missed)}")
        return 1
    print("every layer is caught by at least one browser test and one non-browser test")
    return 0


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layer", action="append", choices=[m.layer for m in MUTATIONS], help="only this layer")
    parser.add_argument("--list", action="store_true", help="show the layers, their mutations and tests, and stop")
    parser.add_argument("--tests", nargs="+", default=[], help="run these tests instead of the layer's own")
    parser.add_argument("--no-baseline", action="store_true", help="skip the run on the unmutated tree")
    parser.add_argument("--verbose", action="store_true", help="show pytest's output")
    parser.add_argument("--jobs", type=int, default=2, help="layers judged at once, each in its own copy (default 2)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    chosen = [m for m in MUTATIONS if not args.layer or m.layer in args.layer]
    try:
        for mutation in MUTATIONS:  # the whole table stays honest, whichever layers run
            check_edits(mutation, ROOT)
            check_test_ids(mutation.layer, mutation.tests, ROOT)
        check_test_ids("--tests", args.tests, ROOT)
    except TableOutOfDate as stale:
        print(f"mutants: refusing to run: {stale}", file=sys.stderr)
        return 2
    if args.list:
        print_list(chosen)
        return 0
    try:
        return run(chosen, args.tests, with_baseline=not args.no_baseline, verbose=args.verbose, jobs=args.jobs)
    except KeyboardInterrupt:
        print("\ninterrupted: the copy was put back and removed; the real files were never changed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
