"""One prompt set per cell (issue 32 item 7, docs/theory.md §13): a cell whose verdict sets its
degenerate prompts aside shows every figure — the γ table, α's basis, ITL, TTFT, latency tails,
the engine concurrency and load tables, the cost table's tails — over the same non-degenerate
prompts, and says so; summary.csv says which prompts each row covers.

The figures are recomputed here from the shipped runs' records with plain arithmetic (ratios of
sums, means, medians, counts), not with the analysis' functions. The same arithmetic over every prompt
must reproduce the cells without degenerate prompts: the control that it is the analysis'
definition, so that a match on the restricted cell means "over the verdict's prompts"."""

from __future__ import annotations

import csv
import json
import shutil
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.results_model_workload import WorkloadResult
from specbench.cli.app import app
from tests.report.markdown import md_table

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner(env={"COLUMNS": "100", "NO_COLOR": "1"})
Rec = dict[str, Any]


def _report(tmp: Path, name: str) -> tuple[Path, RunResults, list[Rec]]:
    run = tmp / name
    shutil.copytree(ROOT / "docs" / name, run)
    res = runner.invoke(app, ["report", str(run), "--gpu-hour-usd", "2.5"])
    assert res.exit_code == 0, res.output
    results = RunResults.model_validate_json((run / "results.json").read_text())
    records = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines() if x]
    return run, results, records


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResults, list[Rec]]:
    return _report(tmp_path_factory.mktemp("basis"), "example-run")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResults, list[Rec]]:
    return _report(tmp_path_factory.mktemp("basis"), "example-engine-run")


def _cell(records: list[Rec], e: WorkloadResult, keep: set[str]) -> list[Rec]:
    return [
        r
        for r in records
        if r.get("workload") == e.workload
        and r.get("temperature") == e.temperature
        and r.get("kind") in ("baseline", "spec")
        and r.get("status", "ok") == "ok"
        and str(r["prompt_id"]) in keep
    ]


def _decode(r: Rec) -> tuple[float, float]:
    """(decode tokens, decode ms): the tokens after each turn's first, and their time."""
    tokens = r["new_tokens"] - len(r["ttft_ms"])
    ms = r["decode_ms"] if r.get("decode_ms") is not None else r["tpot_ms"] * tokens
    return float(tokens), float(ms)


def _itl(recs: list[Rec]) -> float:
    return sum(_decode(r)[1] for r in recs) / sum(_decode(r)[0] for r in recs)


def _speedup(base: list[Rec], spec: list[Rec]) -> float:
    """Decode time saved on the same tokens (docs/theory.md §8): per prompt (repeats summed),
    the baseline's and the setting's ms per token, weighted by the prompt's mean decode tokens
    of the two sides; their ratio of sums (the pooled throughput ratio when both sides decode
    the same tokens)."""
    by = {(r["prompt_id"], r.get("repeat", 0)): _decode(r) for r in base}
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for r in spec:
        if (k := (r["prompt_id"], r.get("repeat", 0))) in by:
            s = sums[str(r["prompt_id"])]
            for i, v in enumerate((*_decode(r), *by[k])):
                s[i] += v
    num = sum((ts + tb) / 2 * mb / tb for ts, _, tb, mb in sums.values())
    den = sum((ts + tb) / 2 * ms / ts for ts, ms, tb, _ in sums.values())
    return num / den


def _stored_degenerate(records: list[Rec], e: WorkloadResult) -> set[str]:
    """The prompts any of whose answers the run's own content checks flagged (stored per turn)."""
    every = {str(r["prompt_id"]) for r in _cell(records, e, _all_prompts(records, e))}
    return {
        str(r["prompt_id"])
        for r in _cell(records, e, every)
        if any(c.get("degenerate") for c in r.get("content") or [])
    }


def _all_prompts(records: list[Rec], e: WorkloadResult) -> set[str]:
    return {
        str(r["prompt_id"])
        for r in records
        if r.get("workload") == e.workload
        and r.get("temperature") == e.temperature
        and "prompt_id" in r
    }


@pytest.mark.slow  # the example run's full report: half a minute under load
def test_every_figure_of_a_cell_is_over_its_verdicts_prompts(
    example: tuple[Path, RunResults, list[Rec]],
) -> None:
    run, results, records = example
    md = (run / "report.md").read_text()
    csv_rows = list(csv.DictReader((run / "summary.csv").read_text().splitlines()))
    own = {(r["workload"], r["T"]): r for r in md_table(md, "workload", "## If you route")}
    cost = {(r["workload"], r["T"]): r for r in md_table(md, "workload", "## Cost and latency")}
    kinds = set()
    for e in results.workloads:
        every = _all_prompts(records, e)
        degenerate = _stored_degenerate(records, e)
        assert {d.prompt_id for d in (e.content.degenerate_prompts if e.content else [])} == (
            degenerate
        )
        # the verdict's prompts: the non-degenerate ones, every one where none is left
        keep = every - degenerate if degenerate and degenerate != every else every
        restricted = keep != every
        kinds.add((bool(degenerate), restricted))
        basis = e.figures_basis
        assert basis is not None
        assert (basis.prompts, basis.n_prompts) == (
            ("non_degenerate" if restricted else "all"),
            len(keep),
        )
        assert e.n_prompts == len(keep)
        recs = _cell(records, e, keep)
        base = [r for r in recs if r["kind"] == "baseline"]
        # baseline ITL, TTFT (mean of the first turn's) and the tails (median = p50)
        assert e.baseline_itl_ms is not None and e.ttft_ms is not None
        assert e.baseline_itl_ms.value == pytest.approx(_itl(base), rel=1e-5)
        assert e.ttft_ms.value == pytest.approx(
            statistics.mean(r["ttft_ms"][0] for r in base), rel=1e-5
        )
        assert e.baseline_tails is not None and e.baseline_tails.n == len(base)
        p50 = statistics.median(r["tpot_ms"] for r in base)
        assert e.baseline_tails.tpot_ms.p50 == pytest.approx(p50, rel=1e-5)
        key = (e.workload, f"{e.temperature:g}")
        assert cost[key]["TPOT ms p50 (off → on)"].startswith(f"{p50:.1f} →")
        assert own[key]["ITL ms (baseline → spec)"].startswith(f"{_itl(base):.2f} →")
        section = md[md.index(f"## {e.workload} (T = {e.temperature:g})") :]
        section = section[: section.index("\n## ")]
        table = {r["γ"]: r for r in md_table(section, "γ")}
        rows = {int(r["gamma"]): r for r in csv_rows if (r["workload"], r["temperature"]) == (
            e.workload, str(e.temperature))}  # fmt: skip
        for g in (row for row in e.gammas if row.measured):
            spec = [
                r
                for r in recs
                if r["kind"] == "spec" and r["gamma"] == g.gamma and r["drafter"] == "model"
            ]
            itl, speedup = _itl(spec), _speedup(base, spec)
            rounds = [a for r in spec for a in r["rounds"]["accepted"]]
            tau = 1 + sum(rounds) / len(rounds)
            assert g.itl_ms is not None and g.measured_speedup is not None
            assert g.itl_ms.value == pytest.approx(itl, rel=1e-5)
            assert g.measured_speedup.value == pytest.approx(speedup, rel=1e-5)
            assert g.mean_tokens_per_round is not None
            assert g.mean_tokens_per_round.value == pytest.approx(tau, rel=1e-5)
            assert g.tails is not None and g.tails.n == len(spec)
            shown = table[str(g.gamma)]
            assert shown["ITL ms"].startswith(f"{itl:.2f}")
            assert shown["tokens/round"].startswith(f"{tau:.2f}")
            if e.recommendation.verdict == "not_measured":  # no verdict: no speedup shown
                assert "measured speedup" not in shown, shown
                assert rows[g.gamma]["measured_speedup"] == ""
                continue
            assert shown["measured speedup"].startswith(f"{speedup:.2f}×")
            assert float(rows[g.gamma]["measured_speedup"]) == pytest.approx(speedup, rel=1e-5)
        for row in rows.values():  # summary.csv: which prompts each row covers
            assert (row["prompts"], row["n_prompts"]) == (basis.prompts, str(len(keep)))
        if restricted:
            assert (
                f"over the verdict's {len(keep)} non-degenerate prompts ({len(degenerate)} of "
                f"{len(every)} degenerate set aside" in section
            )
            # the all-prompt figures: only in the content section's comparison of the sets
            assert e.content is not None and e.content.all_prompts is not None
            setting = e.content.speedup_setting
            assert setting is not None
            every_recs = _cell(records, e, every)
            all_speedup = _speedup(
                [r for r in every_recs if r["kind"] == "baseline"],
                [r for r in every_recs if r["kind"] == "spec" and r["gamma"] == setting.gamma],
            )
            assert e.content.all_prompts.speedup is not None
            assert e.content.all_prompts.speedup.value == pytest.approx(all_speedup, rel=1e-5)
            sets = {r["prompts"]: r for r in md_table(section, "prompts")}
            assert sets["all prompts, degenerate counted"][
                f"speedup at γ {setting.gamma} [95% CI]"
            ].startswith(f"{all_speedup:.2f}×")
            assert f"prompts: {e.workload} T={e.temperature:g}: over its {len(keep)} " in md
        elif degenerate:  # none left: every prompt, labelled as such
            assert f"The γ table is over all {len(every)} prompts, the {len(degenerate)}" in section
            assert f"{e.workload} T={e.temperature:g}: over all {len(every)} prompts" in md
    # the run has each kind of cell: clean, restricted, and degenerate with none left
    assert kinds == {(False, False), (True, True), (True, False)}


@pytest.mark.slow  # the shipped engine run's report: half a minute
def test_an_engine_cells_concurrency_and_load_tables_follow_its_prompts(
    engine: tuple[Path, RunResults, list[Rec]],
) -> None:
    """docs/example-engine-run: tiny_code T=0 keeps 1 non-degenerate prompt of 6, tiny_prose
    T=0 none. Every concurrency row and load cell of tiny_code is over its one prompt (request
    counts, TPOT), its batch throughput is labelled as every prompt's; tiny_prose's over all."""
    run, results, records = engine
    md = (run / "report.md").read_text()
    cells = {e.workload: e for e in results.workloads}
    for name, e in cells.items():
        every = _all_prompts(records, e)
        degenerate = {d.prompt_id for d in (e.content.degenerate_prompts if e.content else [])}
        assert degenerate  # both cells have degenerate answers
        keep = every - degenerate or every
        basis = e.figures_basis
        assert basis is not None and basis.n_prompts == len(keep)
        assert basis.prompts == ("non_degenerate" if keep != every else "all")
        recs = _cell(records, e, keep)
        assert e.engine is not None
        by_cell: dict[tuple[int, int], list[Rec]] = defaultdict(list)
        for r in recs:
            by_cell[(int(r["gamma"]), int(r["concurrency"]))].append(r)
        for crow in e.engine.concurrency:
            base = by_cell[(0, crow.concurrency)]
            assert crow.baseline.tpot_ms is not None
            assert crow.baseline.tpot_ms.value == pytest.approx(_itl(base), rel=1e-5)
            assert crow.baseline.n == len(base)
            assert crow.baseline.tails is not None and crow.baseline.tails.n == len(base)
        assert e.engine.load
        for cell in e.engine.load:
            mine = by_cell[(cell.gamma, int(cell.concurrency or 0))]
            assert cell.n == len(mine), (name, cell)
            assert cell.tpot_ms.p50.value == pytest.approx(
                statistics.median(r["tpot_ms"] for r in mine), rel=1e-5
            )
        section = md[md.index(f"### {name} (T = 0): load") :]
        rows = md_table(section, "setting")
        assert {r["requests"] for r in rows} == {str(len(by_cell[(0, 1)]))}
        if keep != every:
            assert any("per batch" in x for x in basis.all_prompts)
            assert f"prompts: {name} T=0: over its {len(keep)} non-degenerate prompt of" in section
        else:
            assert f"prompts: {name} T=0: over all {len(every)} prompts" in section
