"""The canary's confidence sequences (analysis/canary/sequences.py, docs/theory.md §20):
hand-computed wealth, and coverage under continuous monitoring by seeded simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from specbench.analysis.canary.guards import ratio_floor_from_alpha
from specbench.analysis.canary.sequences import (
    betting_bounds,
    betting_sequence,
    mean_sequence,
    running_bounds,
    windows_to_settle,
)


def test_betting_lower_bound_matches_the_wealth_computed_by_hand() -> None:
    # Ten windows at 0.9. The first bet is predictable from the prior (σ̂² = 1/4, i = 1):
    # λ_1 = √(2·log(1/α) / (0.25·1·log 2)), each bet truncated at 0.5/m against candidate m.
    # m is excluded from below once Π(1 + λ_i (x_i − m)) ≥ 1/α: the lower bound sits where that
    # product crosses 1/α.
    x = np.full(10, 0.9)
    a = 0.05
    lower, upper = betting_bounds(x, a)
    i = np.arange(1, 11, dtype=float)
    mu = (0.5 + np.cumsum(x)) / (i + 1)
    var_after = (0.25 + np.cumsum((x - mu) ** 2)) / (i + 1)
    var_before = np.concatenate(([0.25], var_after[:-1]))
    lam = np.sqrt(2 * math.log(1 / a) / (var_before * i * np.log1p(i)))

    def wealth(m: float) -> float:
        return float(np.prod(1 + np.minimum(lam, 0.5 / m) * (x - m)))

    assert wealth(lower[-1]) >= 1 / a  # the bound itself is excluded …
    assert wealth(lower[-1] + 0.001) < 1 / a  # … and a little above it is not
    assert upper[-1] == 1.0  # nothing near 1 can be excluded by values of 0.9
    assert 0.3 < lower[-1] < 0.9


def test_sequences_are_infinite_before_the_minimum_windows_and_shrink_after() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 1.0, 400)
    early = mean_sequence(x[:3], 0.025, 100, 4)
    assert early.lower == -math.inf and early.upper == math.inf
    widths = [mean_sequence(x[:n], 0.025, 100, 4) for n in (10, 100, 400)]
    w = [b.upper - b.lower for b in widths]
    assert w[0] > w[1] > w[2]
    b = betting_sequence(rng.uniform(0.2, 0.6, 200), 0.025, 4)
    assert 0.0 < b.lower < 0.4 < b.upper < 1.0


def _miss_rate(kind: str, draws: np.ndarray, truth: float, side_alpha: float) -> float:
    missed = 0
    for x in draws:
        # a 1001-point grid of candidate means (bounds rounded outwards: coarser, never narrower)
        _, lo, hi = running_bounds(x, kind, side_alpha, 100, 4, grid_points=1001)
        missed += bool(((lo > truth) | (hi < truth)).any())
    return missed / len(draws)


# Seeds fixed in advance; 300 replicates of 300 looks each (a look after every window).
REPLICATES, LOOKS = 300, 300


@pytest.mark.slow
def test_mean_sequence_covers_at_every_look_with_estimated_variance() -> None:
    # Skewed per-window values (a log ratio of medians is not normal in small windows): the
    # two-sided sequence at α = 0.05 must miss the true mean at some look in ≤ 5 % of runs.
    rng = np.random.default_rng(20261201)
    draws = rng.gamma(2.0, 1.0, (REPLICATES, LOOKS)) - 2.0
    rate = _miss_rate("mean", draws, 0.0, 0.025)
    assert rate <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / REPLICATES)  # nominal + 2 MC s.e.


@pytest.mark.slow
def test_betting_sequence_covers_at_every_look() -> None:
    rng = np.random.default_rng(20261202)
    draws = rng.binomial(40, 0.3, (REPLICATES // 2, LOOKS)) / 40
    rate = _miss_rate("betting", draws, 0.3, 0.025)
    assert rate <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / (REPLICATES // 2))


def test_a_fixed_n_interval_retested_at_every_look_misses_far_more_often() -> None:
    # Why sequences: the Student-t 95 % interval checked after every window from the 4th on.
    rng = np.random.default_rng(20261203)
    draws = rng.normal(0.0, 1.0, (200, 300))
    n = np.arange(1, 301)
    mean = np.cumsum(draws, axis=1) / n
    var = (np.cumsum(draws**2, axis=1) - n * mean**2) / np.maximum(n - 1, 1)
    half = sps.t.ppf(0.975, np.maximum(n - 1, 1)) * np.sqrt(var / n)
    miss = (np.abs(mean) > half)[:, 3:].any(axis=1).mean()
    assert miss > 0.25  # against its nominal 0.05
    seq = _miss_rate("mean", draws[:60], 0.0, 0.025)
    assert seq < miss / 3


def test_windows_to_settle_grows_as_the_estimate_nears_the_line() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(0.05, 0.1, 30)
    b = mean_sequence(x, 0.0025, 120, 8)
    far = windows_to_settle(b, b.estimate - 0.05, 0.0025, 120)
    near = windows_to_settle(b, b.estimate - 0.01, 0.0025, 120)
    assert far is not None and near is not None and near > far
    more = mean_sequence(np.concatenate([x, rng.normal(0.05, 0.1, far)]), 0.0025, 120, 8)
    assert more.upper - more.lower < (b.upper - b.lower)


def test_ratio_floor_from_alpha_hand_computed() -> None:
    # α = 0.5, γ = 2: ā = 1 + 0.5 + 0.25 = 1.75 tokens per round, so 0.75 of 2 proposed accepted
    assert ratio_floor_from_alpha(0.5, 2) == pytest.approx(0.375)
    assert ratio_floor_from_alpha(0.8, 1) == pytest.approx(0.8)
