"""`specbench compare` over the prompts each side's verdict uses (issue 32 item 7, docs/theory.md
§13, docs/compare.md "Degenerate prompts"): a cell whose verdict sets degenerate prompts aside is
compared over its non-degenerate prompts, and a prompt set aside on EITHER side is set aside on
both, so that the two sides are paired over the same prompts.

On real files: the shipped example run against itself (tiny_code T = 0 rests on 2 of its 8
prompts), and against a copy whose records make one tiny_code T = 1 prompt's baseline answer
degenerate (its text replaced by a repeated line; the stored content checks dropped, so that the
analysis computes them from the text as it does for older records). The expected speedups are
recomputed here from the records with plain arithmetic: pooled decode throughput with
speculation ÷ without, Σ tokens / Σ ms over the prompts kept — not with the analysis' functions.
The same arithmetic over every prompt is the control (it differs, so a match means "over the
verdict's prompts")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from specbench.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner(env={"COLUMNS": "100", "NO_COLOR": "1"})
Rec = dict[str, Any]
EDITED = ("tiny_code", 1.0)  # the cell whose prompt becomes degenerate on one side


def _records(run: Path) -> list[Rec]:
    return [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines() if x]


def _cell(records: list[Rec], workload: str, temperature: float) -> list[Rec]:
    return [
        r
        for r in records
        if r.get("workload") == workload
        and r.get("temperature") == temperature
        and r.get("kind") in ("baseline", "spec")
        and r.get("status", "ok") == "ok"
    ]


def _speedup(cell: list[Rec], gamma: int, keep: set[str]) -> float:
    """(Σ spec decode tokens / Σ spec decode ms) / (Σ baseline tokens / Σ baseline ms) over the
    prompts in `keep`; decode tokens are those after each turn's first (docs/theory.md §9)."""

    def sums(recs: list[Rec]) -> tuple[float, float]:
        tokens = sum(r["new_tokens"] - len(r["ttft_ms"]) for r in recs)
        return tokens, sum(r["decode_ms"] for r in recs)

    base = [r for r in cell if r["kind"] == "baseline" and r["prompt_id"] in keep]
    spec = [
        r
        for r in cell
        if r["kind"] == "spec"
        and r["gamma"] == gamma
        and r["drafter"] == "model"
        and r["policy"] == "fixed"
        and r["prompt_id"] in keep
    ]
    (st, sm), (bt, bm) = sums(spec), sums(base)
    return (st / sm) / (bt / bm)


def _degenerate(cell: list[Rec]) -> set[str]:
    """The prompts any of whose stored answers' content checks say degenerate."""
    return {r["prompt_id"] for r in cell if any(c.get("degenerate") for c in r.get("content", []))}


def _compare(base: Path, new: Path) -> dict[str, Any]:
    res = runner.invoke(app, ["compare", str(base), str(new), "--json"])
    assert res.exit_code in (0, 1, 5), res.output
    doc: dict[str, Any] = json.loads(res.output)
    return doc


def _rows(doc: dict[str, Any], workload: str, temperature: float) -> dict[str, dict[str, Any]]:
    return {
        r["metric"]: r
        for r in doc["rows"]
        if r["workload"] == workload and r["temperature"] == temperature
    }


@pytest.fixture(scope="module")
def edited(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy of the example run whose first tiny_code T = 1 prompt's baseline answer is a
    repeated line (the stored content checks removed: computed from the text)."""
    run = tmp_path_factory.mktemp("cmp") / "edited"
    shutil.copytree(ROOT / "docs" / "example-run", run)
    records = _records(run)
    cell = _cell(records, *EDITED)
    assert not _degenerate(cell)  # the control: no prompt of this cell is degenerate as shipped
    target = sorted({r["prompt_id"] for r in cell})[0]
    for r in cell:
        if r["kind"] == "baseline" and r["prompt_id"] == target:
            r["answers"] = ["self.x = None\n        " * 8]
            r.pop("content", None)
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run, target


@pytest.mark.slow  # two runs' results recomputed from records: seconds each
def test_compare_with_itself_is_over_the_verdicts_prompts() -> None:
    run = ROOT / "docs" / "example-run"
    doc = _compare(run, run)
    records = _records(run)
    code0 = _cell(records, "tiny_code", 0.0)
    prompts, degenerate = {r["prompt_id"] for r in code0}, _degenerate(code0)
    assert len(degenerate) == 6 and len(prompts) == 8  # the shipped cell: 2 of 8 left
    kept = _speedup(code0, 4, prompts - degenerate)
    every = _speedup(code0, 4, prompts)
    assert abs(kept - every) > 0.1  # the control: the two prompt sets give different figures
    rows = _rows(doc, "tiny_code", 0.0)
    for metric in ("speedup@4", "speedup_recommended"):  # OFF: the best measured γ = 4
        assert rows[metric]["base"] == pytest.approx(kept, rel=1e-9)
        assert rows[metric]["new"] == pytest.approx(kept, rel=1e-9)
    note = "over 2 prompts: the 6 degenerate set aside, as both runs' verdicts do"
    assert all(note in r["note"] for m, r in rows.items() if m != "verdict"), rows
    assert any("tiny_code T=0 " + note in n for n in doc["notes"]), doc["notes"]
    # a cell without degenerate prompts: every prompt, and no note
    code1 = _cell(records, "tiny_code", 1.0)
    rows1 = _rows(doc, "tiny_code", 1.0)
    assert rows1["speedup@4"]["base"] == pytest.approx(
        _speedup(code1, 4, {r["prompt_id"] for r in code1}), rel=1e-9
    )
    assert not any("degenerate" in r["note"] for r in rows1.values())
    # every prompt degenerate (NOT MEASURED): figures over every prompt, nothing set aside
    prose0 = _cell(records, "tiny_prose", 0.0)
    assert _degenerate(prose0) == {r["prompt_id"] for r in prose0}
    rows_p = _rows(doc, "tiny_prose", 0.0)
    assert rows_p["speedup@4"]["base"] == pytest.approx(
        _speedup(prose0, 4, {r["prompt_id"] for r in prose0}), rel=1e-9
    )
    assert not any("degenerate" in r["note"] for r in rows_p.values())


@pytest.mark.slow  # two runs' results recomputed from records, both directions
def test_a_prompt_degenerate_on_one_side_is_set_aside_on_both(edited: tuple[Path, str]) -> None:
    shipped = ROOT / "docs" / "example-run"
    run, target = edited
    base_cell = _cell(_records(shipped), *EDITED)
    new_cell = _cell(_records(run), *EDITED)
    prompts = {r["prompt_id"] for r in base_cell}
    assert len(prompts) == 8
    others = prompts - {target}
    for base, new, counts in (
        (shipped, run, "(0 in base, 1 in new)"),
        (run, shipped, "(1 in base, 0 in new)"),
    ):
        doc = _compare(base, new)
        rows = _rows(doc, *EDITED)
        b_cell, n_cell = (base_cell, new_cell) if base == shipped else (new_cell, base_cell)
        for g in (2, 4):
            want_b, want_n = _speedup(b_cell, g, others), _speedup(n_cell, g, others)
            assert rows[f"speedup@{g}"]["base"] == pytest.approx(want_b, rel=1e-9)
            assert rows[f"speedup@{g}"]["new"] == pytest.approx(want_n, rel=1e-9)
            # the control: over every prompt the shipped side's figure differs
            assert abs(_speedup(base_cell, g, prompts) - _speedup(base_cell, g, others)) > 1e-3
        note = f"over 7 prompts: 1 degenerate set aside on both sides {counts}"
        assert all(note in r["note"] for m, r in rows.items() if m != "verdict"), rows
        # the other cells are as they were: tiny_code T = 0 still over its own 2 prompts
        assert "over 2 prompts" in _rows(doc, "tiny_code", 0.0)["speedup@4"]["note"]


@pytest.mark.slow  # two reports written, then compared from their results.json alone
def test_results_json_sides_say_when_their_prompt_sets_differ(
    edited: tuple[Path, str], tmp_path: Path
) -> None:
    """A side given as results.json alone cannot be restricted (no per-prompt values): its
    stored figures are over its own verdict's prompts, and the row says whether the two sides'
    prompt sets are the same."""
    shipped = tmp_path / "shipped"
    shutil.copytree(ROOT / "docs" / "example-run", shipped)
    run, _ = edited
    for d in (shipped, run):
        res = runner.invoke(app, ["report", str(d)])
        assert res.exit_code == 0, res.output
    doc = _compare(shipped / "results.json", run / "results.json")
    assert doc["mode"].startswith("stored CIs")
    rows = _rows(doc, *EDITED)
    differ = "stored figures over each run's own verdict prompts (0 degenerate set aside in base, 1"
    assert all(differ in r["note"] for m, r in rows.items() if m != "verdict"), rows
    same = "over each run's verdict prompts (6 degenerate set aside)"
    assert same in _rows(doc, "tiny_code", 0.0)["speedup@4"]["note"]
    # stored figures as each run's report computed them: the shipped side over all 8 prompts
    stored = json.loads((shipped / "results.json").read_text())
    entry = next(e for e in stored["workloads"] if (e["workload"], e["temperature"]) == EDITED)
    g4 = next(g for g in entry["gammas"] if g["gamma"] == 4)
    assert rows["speedup@4"]["base"] == pytest.approx(g4["measured_speedup"]["value"])
