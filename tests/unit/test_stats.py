"""The resampling layer: hand-checked values, clustering, bounds, edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from specbench.analysis.stats.resampling import (
    bootstrap,
    log_linear_replicates,
    mean_ci,
    proportion_ci,
    ratio_ci,
    simultaneous_lower,
    throughput_ratio_ci,
)


def test_delta_method_se_matches_the_textbook_formula() -> None:
    """se(log mean) = sd / (√n · mean) for a mean."""
    x = np.array([1.0, 2.0, 4.0, 3.0, 5.0])
    rep = log_linear_replicates([[x, np.ones_like(x)]], (1.0, -1.0), n_boot=10)
    assert rep.log_value[0] == pytest.approx(math.log(3.0))
    assert rep.se[0] == pytest.approx(x.std(ddof=1) / math.sqrt(5) / 3.0)


def test_repeats_are_one_cluster() -> None:
    """Each prompt measured three times with the same values: clustered, the interval equals the
    single-measurement one; unclustered it would be too narrow."""
    rng = np.random.default_rng(0)
    num, den = rng.lognormal(0, 0.5, 10), rng.lognormal(1, 0.2, 10)
    once = ratio_ci(num, den)
    ids = [f"p{i}" for i in range(10)] * 3
    thrice = ratio_ci(np.tile(num, 3), np.tile(den, 3), clusters=ids)
    assert (thrice.value, thrice.lo, thrice.hi) == pytest.approx((once.value, once.lo, once.hi))
    naive = ratio_ci(np.tile(num, 3), np.tile(den, 3))
    assert naive.hi - naive.lo < 0.8 * (once.hi - once.lo)


def test_proportion_interval_stays_in_unit_range_at_small_n() -> None:
    est = proportion_ci(np.array([9.0, 1.0, 10.0, 8.0, 6.0, 9.0]), np.full(6, 10.0))
    assert 0.0 < est.lo < est.value < est.hi < 1.0


def test_two_units_at_zero_and_one_give_an_honestly_unbounded_interval() -> None:
    """Half the resamples of {all accepted, none accepted} sit at a rate of 0 or 1: the bootstrap
    cannot bound the rate and says so instead of printing a zero-width interval."""
    est = proportion_ci(np.array([10.0, 0.0]), np.array([10.0, 30.0]))
    assert est.value == pytest.approx(0.25)
    assert (est.lo, est.hi) == (0.0, 1.0)


def test_one_outlying_prompt_does_not_blow_up_the_interval() -> None:
    """Seven prompts near 0.9 and one at 0.37 (the shipped tiny_prose at T = 0): resamples that
    miss the outlier have a tiny se*; the floor keeps the interval near the Student-t one
    (0.81 ± 2.36 · 0.067 = [0.65, 0.97]) instead of running down to 0.03."""
    rates = np.array([0.84, 0.90, 0.91, 0.91, 0.37, 0.90, 0.91, 0.86])
    est = ratio_ci(rates * 100, np.full(8, 100.0))
    assert 0.55 < est.lo < 0.70 and 0.95 < est.hi < 1.05


def test_zero_rate_has_a_zero_lower_end_and_no_invented_upper_end() -> None:
    est = proportion_ci(np.zeros(5), np.full(5, 10.0))
    assert est.value == 0.0 and est.lo == 0.0 and math.isnan(est.hi)


def test_throughput_ratio_is_pooled_time() -> None:
    """(Σ tok / Σ ms) of the new side over the base side's, not a mean of per-prompt ratios."""
    tok = np.array([10.0, 100.0])
    est = throughput_ratio_ci(tok, np.array([10.0, 50.0]), tok, np.array([10.0, 100.0]))
    assert est.value == pytest.approx((110 / 60) / (110 / 110))


def test_mean_interval_close_to_student_t_on_normal_data() -> None:
    """For symmetric data at moderate n the bootstrap-t interval is near the t interval."""
    x = np.random.default_rng(3).normal(10.0, 1.0, 40)
    est = mean_ci(x, n_boot=4000)
    t = sps.t.ppf(0.975, 39) * x.std(ddof=1) / math.sqrt(40)
    assert est.lo == pytest.approx(x.mean() - t, abs=0.06)
    assert est.hi == pytest.approx(x.mean() + t, abs=0.06)


def test_simultaneous_bounds_are_below_each_marginal_interval() -> None:
    rng = np.random.default_rng(4)
    base = rng.lognormal(0, 0.3, 12)
    cands = [[base * s * rng.lognormal(0, 0.1, 12), base] for s in (1.1, 1.2, 1.3)]
    rep = log_linear_replicates(cands, (1.0, -1.0), 2000)
    bounds, c = simultaneous_lower(rep, 0.95)
    for (top, bottom), b in zip(cands, bounds, strict=True):
        assert b <= ratio_ci(top, bottom).lo + 1e-12
    assert c > 2.0  # wider than one candidate's normal quantile


def test_generic_bootstrap_difference_brackets_the_value() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.normal(1.0, 0.2, 30), rng.normal(0.8, 0.2, 30)
    est = bootstrap(lambda x, y: x.mean(axis=1) - y.mean(axis=1), [a, b], n_boot=2000)
    assert est.lo < est.value < est.hi and est.lo > 0.0
