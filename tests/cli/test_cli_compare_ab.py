"""`specbench compare --ab`: base and candidate run here, each under its own interpreter (the
same one twice here: the test machine has one environment), alternated, then compared."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import pytest
import yaml
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
    ab = json.loads((tmp_path / "ab.json").read_text())
    assert ab["interleave"] == "unit"
    for j in (0, 1):
        turns = [t for t in ab["turns"] if t["pair"] == j]
        units = sorted({t["unit"] for t in turns})
        # every unit (warm-ups included) taken by both sides, one after the other: A B | B A | …
        by_unit = [[t["side"] for t in turns if t["unit"] == u] for u in units]
        assert all(sorted(s) == ["base", "candidate"] for s in by_unit)
        assert all(by_unit[u + 1] == by_unit[u][::-1] for u in range(len(by_unit) - 1))
        # never at the same time: each turn is handed back before the next is given
        assert all(a["t_back"] <= b["t_go"] for a, b in itertools.pairwise(turns))
        records = {
            side: (tmp_path / f"{side}-{j}" / "records.jsonl").read_text().splitlines()
            for side in ("base", "candidate")
        }
        assert len(records["base"]) == len(records["candidate"]) > 0
    # the pairs open with opposite sides (ABBA over pairs as well)
    openers = [next(t["side"] for t in ab["turns"] if t["pair"] == j) for j in (0, 1)]
    assert openers[0] != openers[1]
    # the job, being A/A, calibrates an interleaved gate: the noise of a paired difference
    th = tmp_path / "thresholds.yaml"
    th.write_text("speedup_drop: 0.05\n")
    cal = runner.invoke(app, ["compare", "--calibrate", str(tmp_path), "--thresholds", str(th)])
    assert cal.exit_code == 0, cal.output
    assert "2 interleaved A/A pairs" in cal.output
    written = yaml.safe_load(th.read_text())
    assert written["calibration"]["interleaved"] is True and written["calibration"]["runs"] == 4
    plan = runner.invoke(app, ["compare", "--plan", "--thresholds", str(th), "--json"])
    assert "unit by unit" in plan.output


@pytest.mark.slow
@pytest.mark.long
def test_ab_runs_a_candidate_config_one_process_after_the_other(tmp_path: Path) -> None:
    """Two configs (here the candidate drafts with n-gram lookup instead of the draft model):
    what differs is compared as forced; --interleave process runs the sides one at a time."""
    cfg = yaml.safe_load(Path("configs/tiny.yaml").read_text())
    cfg["draft"] = {"method": "ngram"}
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text(yaml.safe_dump(cfg))
    res = runner.invoke(
        app,
        ["compare", "--ab", "configs/tiny.yaml", "--candidate-config", str(candidate),
         "--interleave", "process", "--pairs", "1", "--out", str(tmp_path / "ab"),
         "--run-args", SMALL, "--json", "--allow-inconclusive"],
    )  # fmt: skip
    assert res.exit_code in (0, 1, 5), res.output
    doc = json.loads(res.stdout)
    assert doc["runs"] == {"base": 1, "new": 1}
    ab = json.loads((tmp_path / "ab" / "ab.json").read_text())
    assert ab["interleave"] == "process" and ab["turns"] == []
    assert {o["config"] for o in ab["order"]} == {"configs/tiny.yaml", str(candidate)}
