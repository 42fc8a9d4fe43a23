"""Sizing a CI gate: the plan's minimum detectable effects by hand, its choice of the cheapest
size, the YAML update that keeps comments, and the calibration's upper confidence limit covering
the true run-to-run noise in a seeded simulation (error rate stated: ≤ 5 % below)."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from specbench.analysis.calibration.compare_calibration import SimSize, sim_side, simulate_run
from specbench.analysis.compare.metrics import Calibration, PlanSize, Thresholds
from specbench.analysis.compare.noise import calibrate, run_cost
from specbench.analysis.compare.plan import check_plan, family_size, plan_at, size_gate
from specbench.cli.check.compare_gate import set_keys

CAL = Calibration(
    runs=5,
    confidence=0.95,
    prompts=8,
    groups=4,
    sampled_groups=2,
    settings=2,
    speedup_cv_estimate=0.03,
    speedup_prompt_sd=0.1,
    alpha_prompt_sd=0.2,
    greedy_deterministic=True,
    target_forwards_per_prompt=100.0,
    seconds_per_prompt=2.0,
)


def _z(level: float, power: float, df: float) -> float:
    return float(stats.t.ppf(1 - level / 2, df) + stats.t.ppf(power, df))


def test_plan_mde_matches_the_formula_by_hand() -> None:
    th = Thresholds(run_to_run_cv=0.05)
    # α tested at T > 0 only (deterministic greedy): 2 rows; speedup at the recommended γ: 4
    assert family_size(th, CAL) == 6
    plan = plan_at(th, CAL, prompts=16, runs=3, gpu_hour_usd=2.0)
    rows = {r.metric: r for r in plan.rows}
    z = _z(0.05 / 6, 0.8, 15)
    assert rows["alpha"].mde == pytest.approx(z * 0.2 / math.sqrt(48))
    d = z * math.sqrt(0.1**2 / 48 + 0.05**2 * 2 / 3)
    assert rows["speedup_recommended"].mde == pytest.approx(1 - math.exp(-d))
    assert plan.target_forwards == 2 * 3 * 16 * 100.0 and plan.wall_s == 2 * 3 * 16 * 2.0
    assert plan.usd == pytest.approx(plan.wall_s / 3600 * 2.0)


def test_size_gate_finds_the_smallest_runs_that_detect_and_says_when_none_does() -> None:
    th = Thresholds(run_to_run_cv=0.05, speedup_drop=0.1)
    plan = size_gate(th, CAL, max_prompts=64)
    assert plan.feasible
    fewer = plan_at(th, CAL, plan.prompts, plan.runs_per_side - 1)
    assert plan.runs_per_side == 1 or not fewer.feasible  # the smallest k at that n
    impossible = size_gate(Thresholds(run_to_run_cv=1.0, speedup_drop=0.001), CAL, 8)
    assert not impossible.feasible and "no plan within" in impossible.notes[-1]
    # the overhead of a run shifts the choice to more prompts and fewer runs
    costly = size_gate(th, CAL, max_prompts=64, run_overhead_s=600.0)
    assert costly.runs_per_side <= plan.runs_per_side and costly.prompts >= plan.prompts


def test_a_thresholds_file_plan_is_checked_against_its_calibration() -> None:
    th = Thresholds(run_to_run_cv=0.05, calibration=CAL, plan=PlanSize(prompts=8, runs_per_side=1))
    plan = check_plan(th)
    assert plan is not None and not plan.feasible
    with pytest.raises(ValueError, match="no calibration"):
        check_plan(Thresholds(plan=PlanSize(prompts=8, runs_per_side=1)))
    assert check_plan(Thresholds()) is None


def test_set_keys_replaces_blocks_and_keeps_comments() -> None:
    text = "# head\nsignificance: 0.05  # level\ncalibration:\n  runs: 2\n  x: 1\npower: 0.8\n"
    out = set_keys(
        text, {"calibration": {"runs": 3}, "run_to_run_cv": 0.1}, {"run_to_run_cv": "# c"}
    )
    assert out == (
        "# head\nsignificance: 0.05  # level\ncalibration:\n  runs: 3\npower: 0.8\n"
        "run_to_run_cv: 0.1  # c\n"
    )


def test_run_cost_counts_target_forwards() -> None:
    recs = [
        {"kind": "baseline", "workload": "w", "temperature": 0, "prompt_id": "a", "new_tokens": 10,
         "ttft_ms": [5.0], "decode_ms": 95.0},
        {"kind": "spec", "workload": "w", "temperature": 0, "prompt_id": "a", "new_tokens": 10,
         "ttft_ms": [5.0], "decode_ms": 45.0, "rounds": {"accepted": [2, 3, 1]}},
    ]  # fmt: skip
    cost = run_cost(recs)
    assert (cost.target_forwards, cost.seconds, cost.prompts) == (10 + 1 + 3, 0.15, 1)


@pytest.mark.slow
def test_the_calibrated_upper_limit_covers_the_true_run_to_run_cv() -> None:
    """Simulated A/A runs with a known run-to-run CV of the speedup (0.08): the 95 % upper
    confidence limit from 3 runs is at or above it in ≥ 95 % of replicates (Monte Carlo
    tolerance 2 se); the point estimate is near it on average. Seeds fixed in advance."""
    size = SimSize(workloads=2, gammas=(2, 4))
    true_cv, reps, covered, estimates = 0.08, 30, 0, []
    for rep in range(reps):
        runs = [simulate_run(1000 * rep + j, size, speedup_cv=true_cv) for j in range(3)]
        sides = [sim_side([r], size, f"r{j}") for j, r in enumerate(runs)]
        _, speed, _ = calibrate(sides, [], n_boot=200)
        covered += speed.ucl >= true_cv
        estimates.append(speed.estimate)
    rate = covered / reps
    assert rate >= 0.95 - 2 * math.sqrt(0.95 * 0.05 / reps), rate
    assert 0.04 < sum(estimates) / reps < 0.12


@pytest.mark.slow
def test_interleaved_pairs_calibrate_the_same_noise_with_its_stated_coverage() -> None:
    """Three A/A pairs measured interleaved (each side its own run, true run-to-run CV 0.08, no
    drift shared within a pair — the case where pairing gains nothing): the 95 % upper limit from
    the paired differences covers 0.08 in ≥ 95 % of replicates (2 Monte Carlo se), and the
    calibration says it is interleaved. Seeds fixed in advance."""
    size = SimSize(workloads=2, gammas=(2, 4))
    true_cv, reps, covered, estimates = 0.08, 30, 0, []
    for rep in range(reps):
        runs = [simulate_run(5000 + 1000 * rep + j, size, speedup_cv=true_cv) for j in range(6)]
        sides = [sim_side([r], size, f"r{j}") for j, r in enumerate(runs)]
        pairs = [(sides[2 * j], sides[2 * j + 1]) for j in range(3)]
        cal, speed, _ = calibrate(sides, [], n_boot=200, pairs=pairs)
        assert cal.interleaved
        covered += speed.ucl >= true_cv
        estimates.append(speed.estimate)
    rate = covered / reps
    assert rate >= 0.95 - 2 * math.sqrt(0.95 * 0.05 / reps), rate
    assert 0.03 < sum(estimates) / reps < 0.13
