"""The thresholds file CI gates with: what the docs show is the shipped ci/specbench-
thresholds.yaml, and `compare --thresholds` accepts it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_documented_thresholds_are_the_shipped_file() -> None:
    """Every thresholds block the docs show (README.md, docs/*.md) is the shipped
    ci/specbench-thresholds.yaml (its keys a subset), and the shipped file is what
    `compare --thresholds` accepts."""
    from specbench.analysis.compare.metrics import Thresholds

    shipped = yaml.safe_load((ROOT / "ci" / "specbench-thresholds.yaml").read_text())
    Thresholds.model_validate(shipped)  # every key known, every value in range
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    blocks = [
        b
        for page in pages
        for b in re.findall(
            r"```yaml\n# ci/specbench-thresholds.yaml\n(.*?)```", page.read_text("utf-8"), re.S
        )
    ]
    assert blocks, "no page shows ci/specbench-thresholds.yaml any more"
    for block in blocks:
        shown = yaml.safe_load(block)
        assert shown == {k: shipped[k] for k in shown}
