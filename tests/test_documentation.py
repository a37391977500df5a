"""The README documents what the code has: every setting, every make target it names."""

from __future__ import annotations

import re
from pathlib import Path

from checkout.config import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_every_setting_is_documented_in_the_readme() -> None:
    missing = [name for name in SETTINGS if f"`{name}`" not in README]
    assert missing == []


def test_every_make_target_the_readme_names_exists() -> None:
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    named = set(re.findall(r"make ([a-z][a-z-]*)", README))
    assert named <= targets, named - targets


def test_the_readme_links_nothing_outside_the_repository() -> None:
    assert "../" not in re.sub(r"```.*?```", "", README, flags=re.DOTALL)
