"""The rollout arithmetic of `accept` (analysis/rollout.py) by hand: α per bucket with its position
profile and drift, the blocked bootstrap, the plan through the speedup model, timings from a
run's results."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from specbench.analysis import rollout
from specbench.analysis.arithmetic import roi
from specbench.analysis.documents.results_read import TimingSource
from specbench.analysis.stats.resampling import Estimate
from specbench.analysis.stats.resampling import ratio_ci as stats_ratio_ci


@dataclass(frozen=True)
class _Scores:
    """One request's scores as spec.teacher_forced.RequestScores holds them (plain numpy)."""

    request: int
    positions: np.ndarray
    beta: np.ndarray
    agree: np.ndarray
    target_nll: np.ndarray


def _req(positions: list[int], betas: list[float]) -> _Scores:
    b = np.asarray([betas], float)
    return _Scores(0, np.asarray(positions), b, b[0] > 0.5, np.ones(len(betas)))


def test_bucket_alpha_profile_and_drift_by_hand() -> None:
    three = [
        _req([0, 1, 2, 3], [1.0, 1.0, 0.0, 0.0]),  # bin [0,2): 1, 1   bin [2,4): 0, 0
        _req([0, 1, 2, 3], [1.0, 1.0, 0.5, 0.5]),
        _req([0, 1], [0.5, 0.5]),
    ]
    acc = rollout.summarize_bucket(
        "b", three * 3, ["T=1"], [0, 2, 4], n_boot=500, target_halfwidth=0.02
    )
    (s,) = acc.settings
    assert acc.requests == 9 and acc.tokens == 30 and s.tokens == 30
    assert s.alpha.value == pytest.approx(18.0 / 30)
    assert [(p.start, p.stop, p.tokens, p.requests) for p in s.profile] == [
        (0, 2, 18, 9),
        (2, 4, 12, 6),
    ]
    assert s.profile[0].alpha.value == pytest.approx(5.0 / 6)
    assert s.profile[1].alpha.value == pytest.approx(1.0 / 4)
    assert s.drift is not None and s.drift.value == pytest.approx(1.0 / 4 - 5.0 / 6)
    assert s.drift_bins is not None and s.drift_bins[1].start == 2
    assert s.requests_needed is not None and s.requests_needed > 9
    assert acc.greedy_agreement.value == pytest.approx(12 / 30)  # β > 0.5 in this fixture
    # a bin that fewer than DRIFT_MIN_REQUESTS requests reach cannot decide a drift
    few = rollout.summarize_bucket("b", three, ["T=1"], [0, 2, 4], n_boot=200)
    assert few.settings[0].drift is None and len(few.settings[0].profile) == 2


def test_ratio_ci_of_one_request_has_no_interval() -> None:
    # rollout's intervals are analysis.stats.resampling' (one resampling layer): one request has none
    rng = np.random.default_rng(0)
    num, den = rng.uniform(0, 30, 200), rng.integers(30, 60, 200).astype(float)
    assert math.isnan(stats_ratio_ci(num[:1], den[:1]).lo)


def test_plan_maps_alpha_interval_through_the_speedup_model() -> None:
    tm = rollout.time_model_from_flags(80.0, 7.0, 0.0)
    plan = rollout.plan_rollout(Estimate(0.8, 0.75, 0.85), tm, gamma_max=8, margin=0.05)
    g = plan.best_gamma
    assert plan.verdict == "on" and plan.gamma == g
    assert plan.speedup.value == pytest.approx(roi.speedup(g, 0.8, 80.0, 7.0))
    assert plan.speedup.lo == pytest.approx(roi.speedup(g, 0.75, 80.0, 7.0))
    assert plan.speedup.hi == pytest.approx(roi.speedup(g, 0.85, 80.0, 7.0))
    assert g == max(range(1, 9), key=lambda k: roi.speedup(k, 0.8, 80.0, 7.0))
    assert plan.itl_ms.value == pytest.approx(80.0 / plan.speedup.value)
    # docs/theory.md §4 worked check: T_ar 100, T_d 8, α 0.2 → 1.11× at γ = 1
    assert rollout.predicted_speedup(
        1, 0.2, rollout.time_model_from_flags(100, 8, 0)
    ) == pytest.approx(1.2 / 1.08)


def test_plan_is_undecided_when_the_interval_reaches_below_the_margin() -> None:
    tm = rollout.time_model_from_flags(100.0, 8.0, 0.0)
    # γ=1 at α=0.2 predicts 1.11×, but the CI low end α=0.05 gives 0.97×: not proven
    unsure = rollout.plan_rollout(Estimate(0.2, 0.05, 0.35), tm, 8, 0.05)
    assert unsure.best_gamma == 1 and unsure.verdict == "undecided" and unsure.gamma == 0
    assert unsure.speedup.lo < 1.05 < unsure.speedup.value + 0.1
    slow = rollout.plan_rollout(Estimate(0.05, 0.03, 0.07), tm, 8, 0.05)
    assert (slow.verdict, slow.best_gamma, slow.speedup.value) == ("off", 0, 1.0)
    assert "no γ ≤ 8 beats plain decoding" in slow.reason
    be = rollout.break_even_alpha(1, tm)
    assert be is not None and rollout.predicted_speedup(1, be, tm) == pytest.approx(1.0)


def test_time_model_from_results_prefers_the_bucket_workload() -> None:
    def entry(name: str, t_ar: float) -> dict:  # type: ignore[type-arg]
        return {
            "workload": name,
            "baseline_step_ms": t_ar,
            "timing": {
                "t_draft_ms": {"mean": 1.0},
                "verify_fit": {"t0_ms": 2.0, "t1_ms_per_token": 0.5},
                "overhead_fit": {"o0_ms": 0.25, "o1_ms_per_token": 0.1},
            },
        }

    res = TimingSource.model_validate({"workloads": [entry("a", 10.0), entry("b", 20.0)]})
    tm = rollout.time_model_from_results(res, "b", "r.json")
    assert (tm.t_target_ms, tm.t_draft_ms, tm.verify_base_ms) == (20.0, 1.0, 2.25)
    assert tm.verify_slope_ms == pytest.approx(0.6)
    assert rollout.time_model_from_results(res, "zzz", "r.json").t_target_ms == 15.0
