"""`specbench compare --calibrate` and `--plan`: size a CI gate on the user's own runner.

    specbench compare --calibrate aa1 aa2 aa3 aa4 aa5 --thresholds ci/specbench-thresholds.yaml
    specbench compare --plan --thresholds ci/specbench-thresholds.yaml --gpu-hour-usd 2.5 --write-plan

--calibrate reads A/A runs (one code and config, run directories with records) and writes the
run-to-run noise into the thresholds file as upper confidence limits (`run_to_run_cv`,
`timing_run_to_run_cv`) with a `calibration:` block (per-prompt noise, determinism, cost per
prompt). --plan reads that file and prints the prompts and runs per side every gating row needs
for its power at its minimum effect, and their cost; --write-plan stores it as `plan:`, which
`specbench validate FILE` then checks. The file's comments and other keys are kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
import yaml

from specbench.errors import SpecbenchError
from specbench.report.render.terminal import make_console

UCL_NOTE = "# {c:g} % upper confidence limit from {what} (specbench compare --calibrate)"


def ab_job_runs(job: Path) -> tuple[list[Path], int]:
    """The runs of an A/A `compare --ab` job, base and candidate of each pair in turn, and the
    number of pairs; one line when the job was not A/A (two configs or two interpreters)."""
    try:
        order = json.loads((job / "ab.json").read_text(encoding="utf-8"))["order"]
        sides = {(int(o["pair"]), str(o["side"])): o for o in order}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SpecbenchError(f"{job}/ab.json: not a compare --ab record ({exc})") from None
    pairs = sorted({j for j, _ in sides})
    if any((j, s) not in sides for j in pairs for s in ("base", "candidate")):
        raise SpecbenchError(f"{job}/ab.json: a pair lacks a side; was the job interrupted?")
    for field in ("config", "python"):
        if len({str(o.get(field)) for o in order}) > 1:
            raise SpecbenchError(
                f"{job}: the two sides ran different {field}s; calibrate on an A/A --ab job "
                "(one config, one interpreter)"
            )
    runs = [job / f"{s}-{j}" for j in pairs for s in ("base", "candidate")]
    return runs, len(pairs)


def set_keys(text: str, updates: dict[str, Any], comments: dict[str, str]) -> str:
    """The YAML text with each top-level key's block replaced (or appended), comments and other
    keys kept as they were."""
    lines = text.splitlines()
    for key, value in updates.items():
        block = yaml.safe_dump({key: value}, sort_keys=False, allow_unicode=True).splitlines()
        if key in comments:
            block[0] = f"{block[0]}  {comments[key]}"
        starts = [i for i, ln in enumerate(lines) if ln.startswith(f"{key}:")]
        if not starts:
            lines += block
            continue
        i = j = starts[0]
        j += 1
        while j < len(lines) and lines[j].startswith((" ", "\t", "-")):
            j += 1
        lines[i:j] = block
    return "\n".join(lines) + "\n"


def calibrate_runs(paths: list[Path], thresholds: Path | None, as_json: bool) -> None:
    """--calibrate: measure the A/A runs' noise and write it into the thresholds file."""
    from specbench.analysis.compare.environment import identity_differences
    from specbench.analysis.compare.noise import calibrate, run_cost
    from specbench.harness.compare.compare_inputs import load_side, load_thresholds
    from specbench.harness.run.rundir import load_run
    from specbench.records import RECORDS_FILE
    from specbench.report.compare.compare_gate import calibration_lines

    if thresholds is None:
        raise SpecbenchError("--calibrate writes into a thresholds file: pass --thresholds FILE")
    n_pairs = 0
    if len(paths) == 1 and (paths[0] / "ab.json").is_file():
        paths, n_pairs = ab_job_runs(paths[0])
    if len(paths) < 2 or "vs" in map(str, paths):
        raise SpecbenchError(
            "--calibrate takes 2 or more A/A runs of one code and config (5 or more pin the "
            "noise well), without `vs`"
        )
    for p in paths:
        if not (p / RECORDS_FILE).is_file():
            raise SpecbenchError(f"{p}: --calibrate needs run directories with {RECORDS_FILE}")
    sides = [load_side(p) for p in paths]
    for s in sides[1:]:
        if diffs := identity_differences(sides[0], s):
            what = "; ".join(f"{d.field}: {d.base} vs {d.new}" for d in diffs)
            raise SpecbenchError(
                f"{sides[0].label} and {s.label} measured different things ({what}); "
                "calibrate on A/A runs of one config"
            )
    costs = [run_cost(load_run(p)[0]) for p in paths]
    pairs = [(sides[2 * j], sides[2 * j + 1]) for j in range(n_pairs)] if n_pairs else None
    try:
        cal, speed, timing = calibrate(sides, costs, pairs=pairs)
    except ValueError as exc:
        raise SpecbenchError(str(exc)) from None
    updates: dict[str, Any] = {"run_to_run_cv": round(min(speed.ucl, 1.0), 4)}
    if timing is not None:
        updates["timing_run_to_run_cv"] = round(min(timing.ucl, 1.0), 4)
    updates["calibration"] = cal.model_dump()
    what = f"{n_pairs} interleaved A/A pairs" if n_pairs else f"{cal.runs} A/A runs"
    note = UCL_NOTE.format(c=100 * cal.confidence, what=what)
    text = thresholds.read_text(encoding="utf-8") if thresholds.is_file() else ""
    new_text = set_keys(text, updates, {"run_to_run_cv": note, "timing_run_to_run_cv": note})
    tmp = thresholds.with_name(thresholds.name + ".tmp")
    tmp.write_text(new_text, encoding="utf-8")
    try:
        load_thresholds(tmp, {})  # what is written must load
    except SpecbenchError:
        tmp.unlink()
        raise
    tmp.replace(thresholds)
    if as_json:
        doc = {"thresholds": str(thresholds), **updates}
        typer.echo(json.dumps(doc, indent=2))
        return
    console = make_console()
    for line in calibration_lines(cal, speed, timing):
        console.print(line)
    console.print(f"written to {thresholds}; size the gate: specbench compare --plan --thresholds")


def plan_gate(
    thresholds: Path | None,
    max_prompts: int | None,
    gpu_hour_usd: float | None,
    write: bool,
    as_json: bool,
    run_overhead_s: float = 0.0,
) -> None:
    """--plan: the cheapest prompts × runs per side that detect every gating row's minimum
    effect on the calibrated runner; exit 2 when none does within the bounds."""
    from specbench.analysis.compare.plan import size_gate
    from specbench.harness.compare.compare_inputs import load_thresholds
    from specbench.report.compare.compare_gate import plan_lines, plan_to_dict, render_plan

    if thresholds is None:
        raise SpecbenchError("--plan reads a calibrated thresholds file: pass --thresholds FILE")
    th = load_thresholds(thresholds, {})
    if th.calibration is None:
        raise SpecbenchError(
            f"{thresholds} has no calibration: run `specbench compare --calibrate RUN RUN RUN "
            f"--thresholds {thresholds}` on A/A runs of your runner first"
        )
    plan = size_gate(th, th.calibration, max_prompts or 256, gpu_hour_usd, run_overhead_s)
    if as_json:
        typer.echo(json.dumps(plan_to_dict(plan), indent=2))
    else:
        render_plan(make_console(), plan)
    if not plan.feasible:
        raise SpecbenchError(plan_lines(plan)[-1].removeprefix("note: "))
    if write:
        size = {"prompts": plan.prompts, "runs_per_side": plan.runs_per_side}
        text = set_keys(thresholds.read_text(encoding="utf-8"), {"plan": size}, {})
        thresholds.write_text(text, encoding="utf-8")
        if not as_json:
            typer.echo(f"plan written to {thresholds} (specbench validate {thresholds} checks it)")
