"""Calibration of `specbench compare` by seeded simulation (no model): Holm's adjustment on
hand-computed cases, the A/A false-alarm rate under this machine's run-to-run noise, and the power
against a weak draft and a slower speculative path (docs/compare.md lists the sizes). The
large-replicate table is benchmarks/bench_calibration.py; these use few replicates and assert with
a Monte Carlo tolerance."""

from __future__ import annotations

import math

import pytest

from specbench.analysis.calibration.compare_calibration import (
    SimSize,
    aa_false_alarm_rate,
    power_draft_slowdown,
    power_weak_draft,
)
from specbench.analysis.stats.multiple_testing import holm, min_detectable_effect, satterthwaite_df

SMALL = SimSize(workloads=2, gammas=(2, 4))  # 2 workloads × T ∈ {0, 1} × γ ∈ {2, 4}, 8 prompts


def test_holm_matches_the_definition_on_a_hand_computed_case() -> None:
    # sorted 0.01, 0.02, 0.04, 0.5 (m = 4): 4·0.01, 3·0.02, max(0.06, 2·0.04), max(0.08, 0.5)
    assert holm([0.04, 0.01, 0.5, 0.02]) == pytest.approx([0.08, 0.04, 0.5, 0.06])
    assert holm([0.9, 0.8]) == [1.0, 1.0]  # capped at 1, monotone
    assert holm([]) == []


def test_power_arithmetic() -> None:
    # (z_{0.975} + z_{0.8})·se = (1.95996 + 0.84162)·se
    assert min_detectable_effect(0.1, 0.05, 0.8) == pytest.approx(0.280158, rel=1e-5)
    assert satterthwaite_df([(1.0, 7), (0.0, math.inf)]) == pytest.approx(7)
    assert satterthwaite_df([(1.0, math.inf)]) == math.inf


@pytest.mark.slow
def test_aa_false_alarm_rate_stays_at_or_below_5_percent() -> None:
    rate, se = aa_false_alarm_rate(n_rep=40, seed=11, size=SMALL)
    assert rate <= 0.05 + 2 * se, (rate, se)


@pytest.mark.slow
def test_a_weak_draft_is_caught_in_at_least_80_percent() -> None:
    rate, se = power_weak_draft(n_rep=15, seed=12, size=SMALL)
    assert rate >= 0.80 - 2 * se, (rate, se)


@pytest.mark.slow
def test_a_20_percent_slower_speculative_path_is_caught_at_3_runs_per_side() -> None:
    size = SimSize(workloads=2, gammas=(2, 4), runs_per_side=3)
    rate, se = power_draft_slowdown(n_rep=10, seed=13, size=size)
    assert rate >= 0.80 - 2 * se, (rate, se)
