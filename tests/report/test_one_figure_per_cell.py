"""One figure per cell (issue 32 item 7), over the shipped example run's regenerated report: its
four workload × temperature cells are one ON, two UNDECIDED (one resting on 2 of 8 prompts, 6
degenerate set aside) and one NOT MEASURED (every answer degenerate). For each cell, every table
of report.md and the console summary either shows the verdict's own figure (ON), or shows no
speedup that reads as a result: a cell that stays off shows its best setting's speedup only in
parentheses, the cost table prices the baseline alone, the γ table says which prompts it is over
(the verdict's, tests/report/test_prompt_basis.py), and the counterfactual all-prompt verdict is
marked as such."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from specbench.analysis.documents.results_model import CostAtLoad, RunResults, WorkloadEconomics
from specbench.cli.app import app
from specbench.report.run.console import _bold
from specbench.report.sections.text import cost_change
from tests.report.markdown import md_table

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner(env={"COLUMNS": "100", "NO_COLOR": "1"})
SPEEDUP = re.compile(r"\d+\.\d+×")


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, RunResults]:
    run = tmp_path_factory.mktemp("ex") / "run"
    shutil.copytree(ROOT / "docs" / "example-run", run)
    res = runner.invoke(app, ["report", str(run), "--gpu-hour-usd", "2.5"])
    assert res.exit_code == 0, res.output
    results = RunResults.model_validate_json((run / "results.json").read_text())
    return (run / "report.md").read_text(), res.output, results


def _cells(results: RunResults) -> dict[tuple[str, str], Any]:
    return {(e.workload, f"{e.temperature:g}"): e for e in results.workloads}


@pytest.mark.slow  # a full report of the example run: a minute under load
def test_every_table_shows_one_figure_per_cell(example: tuple[str, str, RunResults]) -> None:
    md, _, results = example
    cells = _cells(results)
    verdicts = {k: e.recommendation.verdict for k, e in cells.items()}
    # the example run has every kind of cell the rule is about
    assert sorted(verdicts.values()) == ["not_measured", "on", "undecided", "undecided"]
    assert any(
        e.recommendation.basis and e.recommendation.basis.prompts == "non_degenerate"
        and e.recommendation.verdict == "undecided"
        for e in cells.values()
    )  # fmt: skip

    own = {(r["workload"], r["T"]): r for r in md_table(md, "workload", "## If you route")}
    cost = {(r["workload"], r["T"]): r for r in md_table(md, "workload", "## Cost and latency")}
    assert own.keys() == cost.keys() == cells.keys()
    for key, e in cells.items():
        rec, row, crow = e.recommendation, own[key], cost[key]
        section = md[md.index(f"## {key[0]} (T = {key[1]})") :]
        section = section[: section.index("\n## ")]
        gamma_rows = {r["γ"]: r for r in md_table(section, "γ")}
        if rec.verdict == "on":
            # the verdict's figure, the pool table's and the γ table's at its γ are one figure
            figure = row["speedup [95% CI]"]
            assert SPEEDUP.match(figure) and f": {figure} (" in section
            assert gamma_rows[str(rec.gamma)]["measured speedup"] == figure
            assert (
                crow["setting"] == f"γ={rec.gamma}" and " → $" in crow["$ / 10⁶ tokens (off → on)"]
            )
            continue
        # no verdict: no bare speedup in the pool table, nothing speculative in the cost table
        shown = row["speedup [95% CI]"]
        assert shown == "–" or (shown.startswith("(") and shown.endswith(")")), (key, shown)
        assert row["at the pool's setting"] == "–" and row["verdict"] != "ON"
        if rec.verdict == "not_measured":
            assert shown == "–" and row["own best setting"] == "–"
        assert crow["setting"] in ("stays off", "not measured"), (key, crow)
        assert crow["TTFT Δ ms"] == "–" and crow["$ / 10⁶ tokens (off → on)"].endswith(
            f"({crow['setting']})"
        )
        assert crow["TPOT ms p50 (off → on)"].endswith("→ –")
        basis = rec.basis
        if basis is not None and basis.prompts == "non_degenerate":
            # the γ table says which prompts it is over, with the counts: the verdict's when
            # some are left (every figure of the cell is), else all, degenerate included
            n = basis.n_used + basis.n_degenerate_excluded
            assert (
                f"The γ table, like every figure of this cell, is over the verdict's "
                f"{basis.n_used} non-degenerate prompts ({basis.n_degenerate_excluded} of {n}"
                if basis.n_used
                else f"The γ table is over all {n} prompts, the {basis.n_degenerate_excluded}"
            ) in section
            sets = {r["prompts"]: r for r in md_table(section, "prompts")}
            counted = sets["all prompts, degenerate counted"]["verdict"]
            assert counted == "–" or counted.startswith("(would be "), counted
            assert sets["non-degenerate (the verdict's)"]["verdict"] == rec.verdict.upper().replace(
                "_", " "
            )
        if rec.verdict == "undecided" and basis is not None:
            # its parenthesized figure is the verdict's best setting over the verdict's prompts
            best = rec.best_measured
            assert best is not None and best.speedup is not None
            assert shown.startswith(f"({best.speedup.value:.2f}×")


@pytest.mark.slow
def test_the_console_summary_follows_the_verdicts(example: tuple[str, str, RunResults]) -> None:
    _, console, results = example
    text = " ".join(console.split())
    # an interval rich would read as a markup tag is printed, not swallowed
    assert "bounds [unbounded, unbounded]" in text and "bounds )" not in text
    table = console[console.index("If you route a workload") :].splitlines()
    for (workload, t), e in _cells(results).items():
        row = next(x for x in table if re.match(rf"{workload}\s+{t}\s", x))
        figures = SPEEDUP.findall(row)
        if e.recommendation.verdict == "on":
            assert figures and f" {figures[0]}" in row  # bare: the result
        else:
            assert all(f"({f})" in row for f in figures), row
        part = re.search(rf"{workload} T={t} c=1: ([^;]+?)(?:;|$| reports)", text)
        assert part is not None, text
        if e.recommendation.verdict == "on":
            assert " → $" in part.group(1)
        else:
            assert "→" not in part.group(1) and "(" in part.group(1), part.group(1)


@pytest.mark.parametrize(
    ("verdict", "shown"),
    [
        ("on", "$7.748 → $5.789"),
        ("off", "$7.748 (stays off)"),
        ("undecided", "$7.748 (stays off)"),
        ("not_measured", "$7.748 (not measured)"),
    ],
)
def test_the_cost_follows_the_verdict(verdict: str, shown: str) -> None:
    """The priced cost of a cell at its setting: the best γ's cost only where it is ON (the
    analysis keeps what turning it on would cost in results.json for every cell)."""
    load = CostAtLoad(
        concurrency=1, usd_per_million_off=7.748, usd_per_million_on=5.789, basis="ITL"
    )
    row = WorkloadEconomics(
        workload="w", temperature=0.0, gamma=4, verdict=verdict, loads=[load],
        ttft_change_ms=0.9, draft_memory_mb=None,
    )  # fmt: skip
    assert cost_change(row, load) == shown


def test_console_prints_an_interval_rich_would_read_as_markup() -> None:
    console = Console(record=True, width=200, color_system=None)
    console.print(_bold("**UNDECIDED** (best γ=4: 1.119×, bounds [unbounded, unbounded])"))
    assert console.export_text().strip() == (
        "UNDECIDED (best γ=4: 1.119×, bounds [unbounded, unbounded])"
    )


@pytest.mark.slow  # the shipped engine run's report: half a minute
def test_an_engine_cell_without_a_verdict_shows_no_speedup(tmp_path: Path) -> None:
    """docs/example-engine-run: both cells NOT MEASURED (too few non-degenerate answers), one
    with a best measured setting in results.json. Neither the console's own-pool table nor the
    documents' shows a speedup for them, the cost prices the baseline alone, and the engine's
    concurrency table says which prompts it is over: the one non-degenerate prompt left, or
    every prompt, degenerate included, where none is left."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "docs" / "example-engine-run", run)
    res = runner.invoke(app, ["report", str(run), "--gpu-hour-usd", "2.5"])
    assert res.exit_code == 0, res.output
    results = RunResults.model_validate_json((run / "results.json").read_text())
    cells = _cells(results)
    assert {e.recommendation.verdict for e in cells.values()} == {"not_measured"}
    assert any(e.recommendation.best_measured for e in cells.values())  # the control
    table = res.output[res.output.index("If you route a workload") : res.output.index("setting:")]
    assert "×" not in table, table
    text = " ".join(res.output.split())
    costs = text[text.index("Cost per 10⁶") : text.index("reports:")]
    assert "→ $" not in costs and costs.count("(not measured)") == 6, costs
    md = (run / "report.md").read_text()
    own = md_table(md, "workload", "## If you route")
    assert all(r["speedup [95% CI]"] == "–" for r in own), own
    engine = md[md.index("## Engine: speedup against concurrency") :]
    for key, e in cells.items():
        basis = e.recommendation.basis
        assert basis is not None and basis.prompts == "non_degenerate"
        n = basis.n_used + basis.n_degenerate_excluded
        section = engine[engine.index(f"### {key[0]} (T = {key[1]})") :]
        note = (
            f"The concurrency table, like every figure of this cell, is over the verdict's "
            f"{basis.n_used} non-degenerate prompt"
            if basis.n_used
            else f"The concurrency table is over all {n} prompts"
        )
        assert section.index(note) < section.index("| concurrency |")
