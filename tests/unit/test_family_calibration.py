"""The three-outcome verdict's error rates and power on the realistic family (docs/theory.md §8,
§10), at small replicate counts with seeds written before the test was run; each bound allows
nominal + 2 Monte Carlo standard errors. benchmarks/bench_calibration.py prints the full table
(≥ 4,000 replicates a setting, fresh seeds)."""

from __future__ import annotations

import numpy as np
import pytest

from specbench.analysis.calibration import family_calibration as fc
from specbench.analysis.calibration import traffic_family as tf
from specbench.analysis.stats import signflip


def _within(r: tuple[float, float], target: float = fc.ALPHA) -> bool:
    return r[0] <= target + 2 * r[1]


def test_below_the_tests_resolution_the_answer_is_undecided() -> None:
    """2^-n > 2.5 % for n ≤ 5: no data can decide, whatever the truth."""
    assert signflip.min_prompts(0.025) == 6
    rng = np.random.default_rng(41)
    tb, mb, ts, ms = tf.draw(rng, 20, 5, (1, 2, 3, 4), tf.Family())
    ms /= 2.0  # every setting twice as fast again: a clear gain that 5 prompts cannot show
    for r in range(20):
        piv = signflip.throughput_pivots(ts[:, r], ms[:, r], np.broadcast_to(tb[r], (4, 5)),
                                         np.broadcast_to(mb[r], (4, 5)))  # fmt: skip
        d = signflip.decide(piv, fc.LINE, fc.ALPHA)
        assert d.outcome == "undecided" and np.isnan(d.lower).all()
    # … and 6 prompts can
    tb, mb, ts, ms = tf.draw(rng, 1, 6, (2,), tf.Family(cost_sigma=0.0))
    piv = signflip.throughput_pivots(ts[:, 0], ms[:, 0] / 3.0, tb[:1], mb[:1])
    assert signflip.decide(piv, fc.LINE, fc.ALPHA).outcome == "on"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n", "k", "sigma"), [(6, 1, 0.5), (8, 4, 0.5), (8, 8, 0.5), (16, 4, 1.0), (32, 1, 0.5)]
)
def test_false_on_false_off_and_both_tails_hold_at_the_line(n: int, k: int, sigma: float) -> None:
    o = fc.outcomes(n, k, fc.LINE, reps=300, seed=1000 + n + k, fam=tf.Family(cost_sigma=sigma))
    assert _within(o.on) and _within(o.off), o
    assert _within(o.below) and _within(o.above), o


@pytest.mark.slow
def test_power_floor_at_eight_prompts() -> None:
    o = fc.outcomes(8, 4, 1.6, reps=200, seed=77)
    assert o.on[0] >= 0.5 - 2 * o.on[1], o


@pytest.mark.slow
def test_pool_decision_holds_its_level_with_measured_weights() -> None:
    assert _within(fc.pool_false_on(8, reps=200, seed=88))


@pytest.mark.slow
def test_following_the_advice_gives_about_eighty_percent_power() -> None:
    (p, se), _ = fc.advice_power(8, 1.3, reps=150, seed=99)
    assert p >= 0.7 - 2 * se, (p, se)


ACCEPTANCE_FAMILIES = list(fc.ACCEPTANCE_GAMMA.items())  # (family, γ): default, then stress


STRESS_MISS = pytest.mark.xfail(
    strict=True,
    reason="known, docs/theory.md §10: the stress case (κ = 2, α sd 0.3, ρ 0.6) is beyond the "
    "claimed family; at this seed the exact-β interval's upper end misses 6.5 % (200 replicates; "
    "1.3–3.7 % under other seeds at 1,000–2,000, 3.5 % at n = 16; the bootstrap-t: 6–8 %)",
)


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
@pytest.mark.parametrize(
    ("fam", "gamma"),
    [ACCEPTANCE_FAMILIES[0], pytest.param(*ACCEPTANCE_FAMILIES[1], marks=STRESS_MISS)],
    ids=["family", "stress"],
)
def test_alpha_and_tau_intervals_hold_each_tail_at_eight_prompts(
    fam: tf.Family, gamma: int
) -> None:
    """The α and τ intervals a verdict prints, on 8 prompts of the family: each one-sided miss
    ≤ 2.5 % + 2 Monte Carlo se (the symmetric bootstrap-t they replace missed 5.5–6.8 % on the
    upper side here)."""
    tails = fc.acceptance_tails(8, reps=200, seed=2808 + gamma, fam=fam, gamma=gamma)
    for name, t in tails.items():
        assert _within(t.below) and _within(t.above), (name, t)


def test_alpha_and_tau_intervals_are_unbounded_below_the_resolution() -> None:
    """Below 6 prompts no interval is claimed: α's is its whole range [0, 1], τ's unbounded."""
    for n in (3, 4, 5):
        tails = fc.acceptance_tails(n, reps=20, seed=2830 + n)
        assert all(t.unbounded == 1.0 for t in tails.values()), (n, tails)


@pytest.mark.slow
@pytest.mark.parametrize("n", [6, 16, 32])
@pytest.mark.parametrize(("fam", "gamma"), ACCEPTANCE_FAMILIES, ids=["family", "stress"])
def test_alpha_and_tau_intervals_hold_each_tail(n: int, fam: tf.Family, gamma: int) -> None:
    tails = fc.acceptance_tails(n, reps=300, seed=2840 + n + gamma, fam=fam, gamma=gamma)
    for name, t in tails.items():
        assert _within(t.below) and _within(t.above), (name, n, t)
