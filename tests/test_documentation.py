"""The documentation documents what the code has: every setting, every make target it names, every link.

The README is the front door; docs/ holds the rest. A moved section must not leave a link, an anchor or
a setting behind, so every relative link (and the heading it points at) is resolved here, on disk.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from checkout.config import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "content" / "README.md",
    ROOT / "tests" / "browser" / "README.md",
    ROOT / "qa" / "README.md",
]
PAGES += sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(page: Path) -> str:
    """The page without its code blocks, where a bracket or a `make x` is an example, not a claim."""
    return re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lowercase, punctuation dropped, spaces as hyphens."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", prose(page), re.MULTILINE):
        anchor = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        numbered, count = anchor, 1
        while numbered in found:
            numbered, count = f"{anchor}-{count}", count + 1
        found.add(numbered)
    return found


def test_every_setting_is_documented_in_the_configuration_page() -> None:
    configuration = (ROOT / "docs" / "configuration.md").read_text()
    missing = [name for name in SETTINGS if f"`{name}`" not in configuration]
    assert missing == []


def test_every_make_target_the_documentation_names_exists() -> None:
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    named = {target for page in PAGES for target in re.findall(r"make ([a-z][a-z-]*)", page.read_text())}
    assert named <= targets, named - targets


def test_every_link_of_the_documentation_leads_to_a_file_and_a_heading_in_the_repository() -> None:
    problems = []
    for page in PAGES:
        for target in LINK.findall(prose(page)):
            if re.match(r"[a-z]+:", target):
                problems.append(f"{page.name}: {target}: a newcomer needs it inside the repository")
                continue
            path, _, fragment = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.is_relative_to(ROOT) or not linked.exists():
                problems.append(f"{page.relative_to(ROOT)}: {target}: no such file in the repository")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                problems.append(f"{page.relative_to(ROOT)}: {target}: no such heading")
    assert problems == []


def test_the_readme_stays_a_front_door() -> None:
    assert len(README.splitlines()) <= 250
    for section in ("## The two commands", "## A five-minute tour", "## Where each layer of the defence lives"):
        assert section in README


def test_the_mutation_tables_patterns_and_tests_still_match_the_code() -> None:
    """make mutants refuses to run on a table out of date; make test says so first (a renamed test, a moved line)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mutants", ROOT / "scripts" / "mutants.py")
    assert spec is not None and spec.loader is not None
    mutants = importlib.util.module_from_spec(spec)
    sys.modules["mutants"] = mutants  # its dataclasses look their module up
    spec.loader.exec_module(mutants)
    for mutation in mutants.MUTATIONS:
        mutants.check_edits(mutation, ROOT)
        mutants.check_test_ids(mutation.layer, mutation.tests, ROOT)
