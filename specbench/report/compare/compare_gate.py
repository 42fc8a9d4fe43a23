"""Render the sizing of a CI gate: what `specbench compare --calibrate` measured and the plan
`specbench compare --plan` proposes (`analysis.compare.plan.GatePlan`)."""

from __future__ import annotations

import math

from pydantic import JsonValue
from rich.console import Console
from rich.table import Table

from specbench.analysis.compare.metrics import METRICS, Calibration
from specbench.analysis.compare.noise import NoiseEstimate
from specbench.analysis.compare.plan import GatePlan


def fmt_effect(metric: str, value: float) -> str:
    """A minimum (detectable) effect in its metric's units, bounded like compare's MDE column."""
    m = METRICS[metric]
    if not math.isfinite(value):
        return "unbounded"
    if not m.relative:
        return "unbounded" if value >= 1.0 else f"−{value:.3f}"
    if m.higher_is_better:
        return "unbounded" if value >= 0.995 else f"−{100 * value:.1f} %"
    return "unbounded" if value > 10 else f"+{100 * value:.1f} %"


def plan_lines(plan: GatePlan) -> list[str]:
    """The plan in a few sentences (console and validate)."""
    size = f"{plan.prompts} prompts per workload × temperature, {plan.runs_per_side} runs"
    cost = (
        f"{plan.target_forwards:,.0f} target forwards and {plan.wall_s / 60:.1f} min measured "
        f"(both sides; {plan.gpu_hours:.3f} GPU-hours"
    )
    cost += f", ${plan.usd:.2f})" if plan.usd is not None else ")"
    verdict = "detects every gating row's minimum effect" if plan.feasible else "cannot detect"
    lines = [
        f"plan: {size} (process pairs) per side; {cost}; {verdict} "
        f"(Holm over {plan.tested_rows} tested gating rows)"
    ]
    lines += [f"note: {n}" for n in plan.notes]
    return lines


def render_plan(console: Console, plan: GatePlan) -> None:
    table = Table(title="gate plan: each gating metric at this size", title_justify="left")
    for col in ("gating metric", "minimum effect", "MDE (80 % power)", "detects", "note"):
        table.add_column(col)
    for r in plan.rows:
        table.add_row(
            r.metric,
            fmt_effect(r.metric, r.minimum),
            fmt_effect(r.metric, r.mde),
            "yes" if r.detects else "[bold red]no[/bold red]",
            r.note,
        )
    console.print(table)
    for line in plan_lines(plan):
        console.print(line)


def plan_to_dict(plan: GatePlan) -> dict[str, JsonValue]:
    """`compare --plan --json`'s document, written as is."""
    return {
        "prompts": plan.prompts,
        "runs_per_side": plan.runs_per_side,
        "feasible": plan.feasible,
        "tested_rows": plan.tested_rows,
        "target_forwards": plan.target_forwards,
        "wall_s": plan.wall_s,
        "gpu_hours": plan.gpu_hours,
        "usd": plan.usd,
        "rows": [
            {
                "metric": r.metric,
                "minimum": r.minimum,
                "mde": r.mde if math.isfinite(r.mde) else None,
                "detects": r.detects,
                "note": r.note,
            }
            for r in plan.rows
        ],
        "notes": [*plan.notes],  # a copy typed as the JSON list it is written as
    }


def calibration_lines(
    cal: Calibration, speed: NoiseEstimate, timing: NoiseEstimate | None
) -> list[str]:
    c = f"{100 * cal.confidence:g} %"
    out = [
        (
            f"{cal.runs // 2} interleaved A/A pairs (compare --ab)"
            if cal.interleaved
            else f"{cal.runs} A/A runs"
        )
        + f", {cal.groups} workloads × temperatures, {cal.prompts} prompts each",
        f"speedup run-to-run CV: {speed.estimate:.4f} (estimate), {speed.ucl:.4f} ({c} upper "
        f"confidence limit, {speed.dof} degrees of freedom, {speed.rows} rows) → run_to_run_cv",
    ]
    if timing is not None:
        out.append(
            f"absolute timing run-to-run CV: {timing.estimate:.4f} (estimate), {timing.ucl:.4f} "
            f"({c} UCL) → timing_run_to_run_cv"
        )
    alpha = "–" if cal.alpha_prompt_sd is None else f"{cal.alpha_prompt_sd:.4f}"
    det = {True: "yes", False: "NO", None: "no T = 0 rows"}[cal.greedy_deterministic]
    out += [
        f"per-prompt SD of a paired difference: log speedup {cal.speedup_prompt_sd:.4f}, "
        f"α (T > 0) {alpha}",
        f"greedy decoding deterministic across the runs (T = 0 acceptance identical): {det}",
        f"cost per prompt (every workload × T and setting, one run): "
        f"{cal.target_forwards_per_prompt:g} target forwards, {cal.seconds_per_prompt:g} s",
    ]
    return out
