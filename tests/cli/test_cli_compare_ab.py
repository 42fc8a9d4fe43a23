"""`specbench compare --ab`: base and candidate run here, each under its own interpreter (the
same one twice here: the test machine has one environment), alternated, then compared."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.cli.app import app

runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})
SMALL = "--max-prompts 1 --gammas 2 --workloads tiny_code --temperature 0"


@pytest.mark.slow
@pytest.mark.long  # a minute or more: make test-long (CI runs it)
def test_ab_runs_both_sides_interleaved_under_their_interpreters(tmp_path: Path) -> None:
    py = sys.executable
    res = runner.invoke(
        app,
        ["compare", "--ab", "configs/tiny.yaml", "--base-python", py, "--candidate-python", py,
         "--pairs", "2", "--out", str(tmp_path), "--run-args", SMALL, "--json"],
    )  # fmt: skip
    assert res.exit_code in (0, 5), res.output  # the same code: never a regression
    doc = json.loads(res.stdout)
    assert doc["runs"] == {"base": 2, "new": 2} and doc["regressions"] == 0
    order = json.loads((tmp_path / "ab.json").read_text())["order"]
    sides = [o["side"] for o in order]
    assert sides[:2] == sides[2:][::-1]  # ABBA
    assert all((tmp_path / f"{s}-{j}" / "records.jsonl").is_file() for s in ("base", "candidate")
               for j in (0, 1))  # fmt: skip
