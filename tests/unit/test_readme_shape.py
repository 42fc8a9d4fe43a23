"""The README is one screen a newcomer reads in two minutes: what it does, the two commands, the
demo's decision, the pipeline, every command in one line each, exit codes, links (issue #30)."""

from __future__ import annotations

import re
from pathlib import Path

from specbench.cli.app import COMMANDS

README = Path(__file__).resolve().parents[2] / "README.md"
MAX_LINES = 110  # the generated demo block is a third of it


def test_the_readme_is_short_and_lists_every_command_once() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES
    rows = re.findall(r"^\| `specbench ([a-z-]+)", text, re.M)
    names = [c.__name__.replace("_", "-") for c in COMMANDS]
    assert sorted(rows) == sorted(names), (rows, names)
    for section in ("## Set up and try it", "## How it works", "## Commands", "## More"):
        assert section in text
