"""Terminal output that fits: `--plain` prints ASCII only, for every model-free command, and the
default tables read at 80 columns (short headers never cut, one line per data row, the long words
in a legend below the table). Everything runs on the shipped example run (docs/example-run)."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from specbench.analysis.arithmetic.roi import scenario
from specbench.analysis.documents.results_model import RunResults
from specbench.cli.app import app
from specbench.report.render.ascii_text import ASCII, to_ascii
from specbench.report.render.terminal import PlainConsole, ascii_mode, make_console
from specbench.report.roi.roi import render_scenario
from specbench.report.run.console import render_summary

ROOT = Path(__file__).resolve().parents[2]
# COLUMNS=80 as a terminal would set it; no NO_COLOR: --plain alone must give ASCII
runner = CliRunner(env={"COLUMNS": "80"})


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example run with its reports regenerated (`report` writes results.json)."""
    run = tmp_path_factory.mktemp("ex") / "run"
    shutil.copytree(ROOT / "docs" / "example-run", run)
    res = runner.invoke(app, ["--plain", "report", str(run)])
    assert res.exit_code == 0, res.output
    return run


def test_every_symbol_specbench_prints_has_an_ascii_spelling() -> None:
    """Every non-ASCII character in the package's source (strings, docs, comments) is in the
    map, and every spelling is ASCII: a new symbol cannot slip into --plain output unspelled."""
    seen = {
        ch
        for p in (ROOT / "specbench").rglob("*.py")
        for ch in p.read_text(encoding="utf-8")
        if not ch.isascii()
    }
    assert seen - ASCII.keys() == set()
    assert all(v.isascii() for v in ASCII.values())
    assert to_ascii("γ=4: 1.2× → ā ≥ 0.5") == "gamma=4: 1.2x -> a_bar >= 0.5"
    assert to_ascii("café_workload") == "café_workload"  # the user's own characters stay


@pytest.mark.slow
def test_plain_output_of_every_model_free_command_is_ascii(example: Path) -> None:
    """--plain through the CLI: roi (relative and in ms), report, simulate, compare (the run
    against itself) and validate. No character is exempted: the only user data printed here (the
    temporary paths and the example's workload names) is ASCII, so any non-ASCII character would
    be specbench's own. (Characters of a user's non-ASCII names would print as given.) Not here:
    commands that need a model or a server (run, verify, accept), canary / predict-check /
    schedule (they need an engine run, none is shipped) and schema (it prints JSON, a document)."""
    commands = [  # (argv, its exit code)
        (["roi", "--alpha", "0.6"], 0),
        (["roi", "--alpha", "0.6", "--t-target", "80", "--t-draft", "7", "--gpu-hour-usd", "2"], 0),
        (["roi", "--alpha", "0.1", "--t-target", "10", "--t-draft", "3"], 0),
        (["roi", "--accepted", "3"], 2),  # the one-line error names γ: spelled "gamma"
        (["report", str(example)], 0),
        (["simulate", str(example)], 0),
        (["compare", str(example), str(example)], 5),  # n = 1 per side: inconclusive
        (["validate", str(ROOT / "configs" / "tiny.yaml")], 0),
    ]
    for argv, code in commands:
        res = runner.invoke(app, ["--plain", *argv])
        assert res.exit_code == code, (argv, res.output)
        assert res.output.strip(), argv
        bad = sorted({ch for ch in res.output if not ch.isascii()})
        assert bad == [], (argv, bad, res.output)


def _render(plain: bool, draw: object) -> list[str]:
    """What `draw(console)` prints on an 80-column terminal, default or --plain."""
    out = io.StringIO()
    cls = PlainConsole if plain else Console
    console = cls(file=out, width=80, force_terminal=False, no_color=True)
    draw(console)  # type: ignore[operator]
    return out.getvalue().splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("plain", [False, True])
def test_run_summary_table_fits_80_columns(example: Path, plain: bool) -> None:
    results = RunResults.model_validate_json((example / "results.json").read_text())
    lines = _render(plain, lambda c: render_summary(c, results))
    assert all(len(line) <= 80 for line in lines)
    head = next(i for i, line in enumerate(lines) if re.match(r"workload +T ", line))
    assert re.split(r"\s+", lines[head].strip()) == [
        "workload", "T", "setting", "speedup", "CI", "ITL", "ms", "verdict",
    ]  # fmt: skip
    rows = lines[head + 2 : head + 2 + len(results.workloads)]
    # one line per workload × temperature, in results order, each holding its verdict
    for line, e in zip(rows, results.workloads, strict=True):
        assert line.startswith(e.workload + " "), line
        assert line.rstrip().endswith(e.recommendation.verdict.upper().replace("_", " ")), line
    assert "…" not in "\n".join(lines[head : head + 2 + len(results.workloads)])
    legend = " ".join(" ".join(lines[head + 2 + len(results.workloads) :]).split())
    assert "setting: the workload's own" in legend and "ITL ms: baseline" in legend


@pytest.mark.parametrize("plain", [False, True])
@pytest.mark.parametrize("relative", [False, True])
def test_roi_table_fits_80_columns(plain: bool, relative: bool) -> None:
    # roi's own inputs: relative times at its default cost ratio 0.1, or 80 ms / 7 ms; γ 1..16
    sc = scenario(0.6, list(range(1, 17)), *((1.0, 0.1) if relative else (80.0, 7.0)))
    lines = _render(plain, lambda c: render_scenario(c, sc, relative, show_cost_ratio=relative))
    text = "\n".join(lines)
    assert all(len(line) <= 80 for line in lines) and "…" not in text
    headers = ["γ", "ā", "round", "ITL", "speedup", "α_be"] + (["c_be"] if relative else [])
    head = next(line for line in lines if re.search(r"\bspeedup\b", line))
    assert re.findall(r"[^\s|│┃]+", head) == [to_ascii(h) if plain else h for h in headers]
    for row in sc.rows:  # each γ's row on one line: its speedup and break-even α side by side
        be = "never" if row.break_even_alpha is None else f"{row.break_even_alpha:.3f}"
        mark = "x" if plain else "×"
        assert any(f"{row.speedup:.3f}{mark}" in line and be in line for line in lines), row


def test_plain_mode_ends_with_its_invocation() -> None:
    """`--plain` holds for the command it precedes only: code that prints afterwards in the same
    process (tests, a host embedding the app) gets the default console again."""
    assert runner.invoke(app, ["--plain", "roi", "--alpha", "0.6"]).output.isascii()
    assert not ascii_mode() and not isinstance(make_console(), PlainConsole)


@pytest.mark.slow
@pytest.mark.parametrize("plain", [False, True])
def test_compare_table_fits_80_columns(example: Path, plain: bool) -> None:
    """`compare --show-unchanged` at 80 columns: no line longer, nothing cut ("…"), one section
    per workload × temperature headed by its label, and every row's status printed whole (the
    rows of the JSON document, in order)."""
    args = ["compare", str(example), str(example), "--show-unchanged"]
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    res = runner.invoke(app, ["--plain", *args] if plain else args)
    assert res.exit_code == doc["exit_code"] == 5, res.output  # one run a side: inconclusive
    lines = res.output.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert str(example) in " ".join(lines[:3]).replace(" ", "")  # the title's paths, whole
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["metric", "base"])
    foot = next(i for i, line in enumerate(lines) if line.startswith(("  *", "  [1]")))
    assert "…" not in "\n".join(lines[:foot])  # nothing cut (the notes may quote `BASE… NEW…`)
    assert lines[head].split() == ["metric", "base", "new", "change", "p", "MDE", "status"]
    statuses = [
        line.split()[-1]
        for line in lines[head + 2 :]
        # a row's first line: its metric indented by two (wrapped values start further in)
        if re.match(r"  [^\s\[*]", line)
    ]
    want = [
        ("info" if r["status"] == "informational" else r["status"]) + ("" if r["gating"] else "*")
        for r in doc["rows"]
    ]
    assert statuses == want
    for w in {f"{r['workload']} T={r['temperature']:g}" for r in doc["rows"]}:
        assert w in [line.strip() for line in lines], w  # the section's own line
