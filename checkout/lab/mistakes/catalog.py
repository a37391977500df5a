"""The nine mistakes, for the pages and the tests: each twin's module, and the text its page shows.

What a mistake is, how to trigger it, what to look for and where its fix
lives is written once per language, in content/<language>/mistakes/<name>.md
(read by checkout.lab.content, in the page's language); the module holds the
wrong code. ``tests/test_content.py`` checks that every file and function a
fix cites exists, and ``tests/test_mistakes.py`` does every trigger against
the twin and the safe endpoint.
"""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from checkout.lab import content
from checkout.lab.mistakes import (
    check_then_insert,
    key_after_operation,
    key_deleted_after_answer,
    memory_store,
    new_gateway_key_per_attempt,
    no_fingerprint,
    no_key,
    no_stored_result,
    twin,
    unscoped_key,
)
from checkout.lab.mistakes.twin import endpoint_of, path_of
from checkout.shop.payment import PaymentPipeline, the_clients_key

SAFE_ENDPOINT = "POST /api/orders"
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

    @property
    def text(self) -> content.MistakeText:
        """Its page's words, in the page's language (content/<language>/mistakes/<name>.md): its title, what goes
        wrong, its trigger, the steps from a browser and the commands from a terminal, what to look for, the fix."""
        return content.mistake(self.name)

    @property
    def fixes(self) -> tuple[Fix, ...]:
        return tuple(Fix(*place.split("::", 1)) for place in self.text.code)

    @property
    def test(self) -> str:
        """The test in tests/test_mistakes.py that measures its damage."""
        return self.text.tests[0].partition("::")[2]

    @property
    def pipeline(self) -> PaymentPipeline:
        """The shop's pipeline with this mistake's one part swapped."""
        found: PaymentPipeline = self.module.PIPELINE
        return found

    @property
    def takes_key(self) -> bool:
        return self.pipeline.keyed

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
        """The wrong part beside the real one it replaces, from the source as it is now, then the order key every
        twin swaps too (so the orders' unique key, which would catch most mistakes, leaves each its own)."""
        swapped = (*self.module.REPLACES, (the_clients_key, twin.a_new_key_per_request))
        return "\n".join(diff_of(real, wrong) for real, wrong in swapped)

    @property
    def shared_source(self) -> str:
        """What every twin starts from and swaps besides its mistake: its endpoint, its records' table, its key."""
        return inspect.getsource(twin)


MISTAKES: tuple[Mistake, ...] = (
    Mistake("no-key", no_key),
    Mistake("check-then-insert", check_then_insert),
    Mistake("memory-store", memory_store),
    Mistake("key-after-operation", key_after_operation),
    Mistake("key-deleted-after-answer", key_deleted_after_answer),
    Mistake("no-stored-result", no_stored_result),
    Mistake("unscoped-key", unscoped_key),
    Mistake("no-fingerprint", no_fingerprint),
    Mistake("new-gateway-key-per-attempt", new_gateway_key_per_attempt),
)

BY_NAME = {mistake.name: mistake for mistake in MISTAKES}
