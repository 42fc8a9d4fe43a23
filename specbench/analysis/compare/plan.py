"""The plan of a CI gate, before anything runs: given the thresholds (minimum effects, the
gating rows) and the runner's calibrated noise (`noise.py`), the prompts and the runs (process
pairs) per side that give every gating row `power` at its minimum effect, and what that costs.

The standard errors compare's tests will have, on the test scale, with n prompts per workload ×
temperature and k runs per side (each side's per-prompt values summed over its runs):

    speedup (log):       se² = sd²_s / (n·k) + σ²_r · 2/k        (paired bootstrap + run term)
    α at T > 0:          se² = sd²_α / (n·k)                      (paired bootstrap)
    α at T = 0:          exact when greedy decoding was deterministic in the calibration runs
    absolute timing:     se² = σ²_t · 2/k, k ≥ 2                  (Welch t over runs)

A row detects its minimum effect m (on the test scale: −log(1 − drop), log(1 + rise), or α's
absolute drop) when (t_{1−a/2, ν} + t_{power, ν}) · se ≤ m, a = significance / (tested gating
rows) — Holm's strictest step — and ν the test's degrees of freedom (n − 1 for the prompt part,
2k − 2 for Welch). `size_gate` takes the cheapest (n, k) in wall time that detects every gating
row's minimum effect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from specbench.analysis.compare.metrics import (
    ALL_ROWS,
    METRICS,
    VERDICT,
    Calibration,
    PlanSize,
    Thresholds,
)
from specbench.analysis.stats.multiple_testing import min_detectable_effect

MAX_RUNS_PER_SIDE = 200  # beyond this a plan is reported infeasible, not sized
SEPARATE_RUNS = (
    "separate runs per side (base and candidate not interleaved on one machine): the calibrated "
    "run-to-run noise applies in full"
)
INTERLEAVED = (
    "base and candidate measured in one job, unit by unit (`compare --ab`): the run-to-run noise "
    "was calibrated on such pairs, so CI must measure that way too"
)


@dataclass(frozen=True)
class RowPlan:
    """One gating metric under a plan: its minimum effect and its minimum detectable effect, in
    the row's units (a relative drop or rise, or α's absolute drop)."""

    metric: str
    minimum: float
    mde: float  # math.inf: cannot be sized (no calibration for it, or untestable)
    note: str = ""

    @property
    def detects(self) -> bool:
        return self.mde <= self.minimum


@dataclass
class GatePlan:
    prompts: int
    runs_per_side: int
    rows: list[RowPlan]
    tested_rows: int  # Holm's family under the plan
    target_forwards: float  # both sides, every run
    wall_s: float  # both sides, measured time (model loading excluded)
    gpu_hour_usd: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return all(r.detects for r in self.rows)

    @property
    def gpu_hours(self) -> float:
        return self.wall_s / 3600.0

    @property
    def usd(self) -> float | None:
        return None if self.gpu_hour_usd is None else self.gpu_hours * self.gpu_hour_usd


def _gated(th: Thresholds) -> list[str]:
    """The gating metrics, "*" expanded; the verdict follows the speedup at the recommended γ."""
    names = list(METRICS) if ALL_ROWS in th.gate else list(th.gate)
    if VERDICT in names and "speedup_recommended" not in names:
        names.append("speedup_recommended")
    return [n for n in names if n != VERDICT]


def family_size(th: Thresholds, cal: Calibration) -> int:
    """How many tested gating rows a comparison of the calibrated shape will have."""
    m = 0
    for name in _gated(th):
        if name == "alpha":
            m += cal.sampled_groups if cal.greedy_deterministic else cal.groups
        elif name in ("speedup", "accepted_length", "itl_ms", "tokens_per_s"):
            m += cal.groups * cal.settings
        else:  # speedup_recommended, baseline_itl_ms, baseline_tokens_per_s: one per group
            m += cal.groups
    return max(1, m)


def _z(level: float, power: float, df: float) -> float:
    return min_detectable_effect(1.0, level, power, df)


def row_plans(
    th: Thresholds, cal: Calibration, prompts: int, runs: int, timing_cv: float
) -> tuple[list[RowPlan], int]:
    """Every gating metric's minimum detectable effect at `prompts` and `runs` per side."""
    m = family_size(th, cal)
    level = th.significance / m
    out = []
    for name in _gated(th):
        metric = METRICS[name]
        minimum = float(getattr(th, metric.threshold))
        if name == "alpha":
            if cal.greedy_deterministic and not cal.sampled_groups:
                out.append(RowPlan(name, minimum, 0.0, "T = 0 only, deterministic: exact"))
                continue
            if cal.alpha_prompt_sd is None:
                note = "no T > 0 calibration runs (α's per-prompt noise unknown)"
                out.append(RowPlan(name, minimum, math.inf, note))
                continue
            se = cal.alpha_prompt_sd / math.sqrt(prompts * runs)
            out.append(RowPlan(name, minimum, _z(level, th.power, prompts - 1) * se))
            continue
        if metric.kind == "speedup":
            se = math.sqrt(
                cal.speedup_prompt_sd**2 / (prompts * runs) + th.run_to_run_cv**2 * 2 / runs
            )
            d = _z(level, th.power, prompts - 1) * se
        elif metric.kind == "timing":
            if runs < 2:
                note = "absolute timing needs ≥ 2 runs per side (or --subject env)"
                out.append(RowPlan(name, minimum, math.inf, note))
                continue
            d = _z(level, th.power, 2 * runs - 2) * timing_cv * math.sqrt(2 / runs)
        else:  # accepted length: no calibration of τ's per-prompt noise
            out.append(RowPlan(name, minimum, math.inf, "τ is not calibrated: gate α instead"))
            continue
        mde = -math.expm1(-d) if metric.higher_is_better else math.expm1(d)
        out.append(RowPlan(name, minimum, mde))
    return out, m


def plan_at(
    th: Thresholds,
    cal: Calibration,
    prompts: int,
    runs: int,
    gpu_hour_usd: float | None = None,
    run_overhead_s: float = 0.0,
) -> GatePlan:
    """The gate at a given size: its rows' MDEs and its cost (`run_overhead_s`: a run's start-up
    and model loading, which the records do not hold)."""
    rows, m = row_plans(th, cal, prompts, runs, th.timing_run_to_run_cv)
    plan = GatePlan(
        prompts,
        runs,
        rows,
        m,
        2 * runs * prompts * cal.target_forwards_per_prompt,
        2 * runs * (prompts * cal.seconds_per_prompt + run_overhead_s),
        gpu_hour_usd,
        [INTERLEAVED if cal.interleaved else SEPARATE_RUNS],
    )
    if cal.greedy_deterministic is False:
        plan.notes.append(
            "greedy decoding was not deterministic across the calibration runs: α at T = 0 is "
            "tested, not compared exactly"
        )
    return plan


def _prompt_sizes(max_prompts: int) -> list[int]:
    sizes, n = [], 2
    while n < max_prompts:
        sizes.append(n)
        n *= 2
    return [*sizes, max_prompts]


def size_gate(
    th: Thresholds,
    cal: Calibration,
    max_prompts: int,
    gpu_hour_usd: float | None = None,
    run_overhead_s: float = 0.0,
) -> GatePlan:
    """The cheapest gate (wall time) that detects every gating row's minimum effect with
    prompts ≤ max_prompts; when none does within MAX_RUNS_PER_SIDE runs, the plan at the largest
    size, marked infeasible (its rows say by how much)."""
    best: GatePlan | None = None
    for n in _prompt_sizes(max(2, max_prompts)):
        lo, hi = 1, MAX_RUNS_PER_SIDE
        if not plan_at(th, cal, n, hi).feasible:
            continue
        while lo < hi:  # the smallest k that detects (MDE falls with k)
            mid = (lo + hi) // 2
            if plan_at(th, cal, n, mid).feasible:
                hi = mid
            else:
                lo = mid + 1
        p = plan_at(th, cal, n, lo, gpu_hour_usd, run_overhead_s)
        key = (p.wall_s, p.target_forwards, p.runs_per_side)
        if best is None or key < (best.wall_s, best.target_forwards, best.runs_per_side):
            best = p
    if best is not None:
        return best
    out = plan_at(th, cal, max(2, max_prompts), MAX_RUNS_PER_SIDE, gpu_hour_usd, run_overhead_s)
    out.notes.append(
        f"no plan within {max(2, max_prompts)} prompts and {MAX_RUNS_PER_SIDE} runs per side "
        "detects every minimum effect: raise the minimum effects, gate fewer rows, or quiet the "
        "runner (then calibrate again)"
    )
    return out


def check_plan(th: Thresholds) -> GatePlan | None:
    """The thresholds file's own plan (`plan:`) evaluated with its calibration; None when the
    file sizes nothing. Raises ValueError when a plan is given without a calibration."""
    if th.plan is None:
        return None
    if th.calibration is None:
        raise ValueError(
            "the thresholds file has a plan but no calibration: run `specbench compare "
            "--calibrate RUN RUN RUN --thresholds FILE` first"
        )
    size: PlanSize = th.plan
    return plan_at(th, th.calibration, size.prompts, size.runs_per_side)
