"""A cell without a verdict shows no speedup anywhere (issue 32 item 7, docs/theory.md §13,
`report/sections/no_verdict.py`): over both shipped runs' regenerated reports — docs/example-run (one
NOT MEASURED cell: every answer degenerate) and docs/example-engine-run (two: 1 non-degenerate
prompt left, and none) — every NOT MEASURED cell's part of report.md (its section, its engine
section, its appendix, every table row and line that names it), the console, summary.csv and
plots/ hold no speedup or ratio figure; its raw measurements (ITL, each arm's TPOT and tokens/s)
stay.

The controls: results.json still holds those cells' measured speedups (the renderers leave them
out, not the analysis), and the same parsing finds the speedups of the cells that have a verdict
(the example run's ON and UNDECIDED cells), so that finding none means none is shown."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.results_model_workload import WorkloadResult
from specbench.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner(env={"COLUMNS": "100", "NO_COLOR": "1"})
# a speedup or ratio as the report prints one: "1.25×", "(1.12×)", "0.97×"
RATIO = re.compile(r"\d+\.\d+×")
SPEEDUP_COLUMNS = (
    "measured_speedup",
    "measured_speedup_lo",
    "measured_speedup_hi",
    "predicted_speedup_iid",
    "predicted_speedup_empirical",
)


def _report(tmp: Path, name: str) -> tuple[Path, str, RunResults]:
    run = tmp / name
    shutil.copytree(ROOT / "docs" / name, run)
    res = runner.invoke(app, ["report", str(run), "--gpu-hour-usd", "2.5"])
    assert res.exit_code == 0, res.output
    return run, res.output, RunResults.model_validate_json((run / "results.json").read_text())


@pytest.fixture(scope="module", params=["example-run", "example-engine-run"])
def shipped(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str, RunResults]:
    return _report(tmp_path_factory.mktemp("noverdict"), request.param)


def _part(md: str, heading: str) -> str:
    """From `heading` (a line of its own) to the next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    start = md.index(f"\n{heading}\n") + 1
    ends = [md.find(f"\n{'#' * n} ", start + 1) for n in range(2, len(level) + 1)]
    ends = [i for i in ends if i != -1]
    return md[start : min(ends) if ends else len(md)]


def _parts(md: str, e: WorkloadResult) -> list[str]:
    """Every part of report.md about cell `e`: its section, its engine and appendix sections,
    every table row of it and every line that names it."""
    t = f"{e.temperature:g}"
    out = [_part(md, f"## {e.workload} (T = {t})")]
    if e.engine is not None:
        out.append(_part(md, f"### {e.workload} (T = {t}), {e.engine.backend}"))
    appendix = md[md.index("## Appendix") :]
    out.append(_part(appendix, f"### {e.workload} (T = {t})"))
    out += [x for x in md.splitlines() if x.startswith(f"| {e.workload} | {t} |")]
    out += [x for x in md.splitlines() if f"{e.workload} T={t}" in x]
    return out


def _shown_ratios(run: Path, console: str, e: WorkloadResult) -> list[str]:
    """Every speedup or ratio figure the report shows for cell `e`."""
    md = (run / "report.md").read_text()
    found = [m for part in _parts(md, e) for m in RATIO.findall(part)]
    t = f"{e.temperature:g}"
    found += [m for x in console.splitlines() if x.startswith(e.workload) and f" {t} " in x
              for m in RATIO.findall(x)]  # fmt: skip
    return found


@pytest.mark.slow  # both shipped runs' full reports: a minute under load
def test_a_cell_not_measured_shows_no_speedup(shipped: tuple[Path, str, RunResults]) -> None:
    run, console, results = shipped
    md = (run / "report.md").read_text()
    cells = [e for e in results.workloads if e.recommendation.verdict == "not_measured"]
    others = [e for e in results.workloads if e.recommendation.verdict != "not_measured"]
    assert cells  # each shipped run has one at least
    csv_rows = list(csv.DictReader((run / "summary.csv").read_text().splitlines()))
    plots = {p.name for p in (run / "plots").iterdir()}
    for e in cells:
        slug = f"{e.workload}_T{e.temperature:g}"
        # the control: the analysis measured a speedup for this cell; the report leaves it out
        assert any(g.measured_speedup and g.measured_speedup.value for g in e.gammas)
        assert _shown_ratios(run, console, e) == [], e.workload
        section = _part(md, f"## {e.workload} (T = {e.temperature:g})")
        assert "the γ table shows no speedup or ratio to the baseline" in section
        assert "speedup" not in section.split("| γ |", 1)[1].splitlines()[0]  # its header
        rows = [r for r in csv_rows if (r["workload"], float(r["temperature"])) == (
            e.workload, e.temperature)]  # fmt: skip
        assert rows and all(r[c] == "" for r in rows for c in SPEEDUP_COLUMNS), rows
        assert any(r["itl_ms"] for r in rows)  # the raw measurement stays
        for kind in ("speedup", "concurrency", "schedule"):
            assert f"{kind}_{slug}.png" not in plots
            assert f"plots/{kind}_{slug}.png" not in md
        if e.engine is not None:
            part = _part(md, f"### {e.workload} (T = {e.temperature:g}), {e.engine.backend}")
            assert "speedup [95% CI]" not in part and "throughput ×" not in part
            assert "γ=2 tok/s" in part and "baseline TPOT ms" in part  # raw, each arm
            assert "γ schedule by concurrency:" not in part
    for e in others:  # the control: the same parsing finds the speedups of cells with a verdict
        assert _shown_ratios(run, console, e), e.workload
        slug = f"{e.workload}_T{e.temperature:g}"
        assert f"speedup_{slug}.png" in plots
