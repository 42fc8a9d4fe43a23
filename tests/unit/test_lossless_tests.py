"""verify's statistics without a model: the PIT by hand, and a seeded synthetic exact sampler whose
family of tests fails no more often than the stated significance — and a bonus drawn from the
wrong row, which it catches."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specbench.analysis.verify.lossless_tests import (
    null_false_fail_rate,
    pit_test,
    pit_values,
)


def test_pit_by_hand() -> None:
    p = np.array([0.2, 0.5, 0.3])  # ranked: token 1 (0.5), token 2 (0.3), token 0 (0.2)
    rng = np.random.default_rng(0)
    u = pit_values(p, np.array([1, 2, 0, 0]), rng)
    assert 0.0 <= u[0] <= 0.5 and 0.5 <= u[1] <= 0.8 and 0.8 <= u[2] <= 1.0 and u[3] >= 0.8
    # ties ranked by token id: [0.5, 0.5] → token 0 first
    assert pit_values(np.array([0.5, 0.5]), np.array([1]), rng)[0] >= 0.5


def test_pit_is_uniform_for_tokens_drawn_from_p() -> None:
    rng = np.random.default_rng(1)
    groups = []
    for _ in range(40):  # many prefixes, each its own p
        p = rng.dirichlet(np.full(30, 0.3))
        groups.append((p, rng.choice(30, size=50, p=p)))
    u = np.concatenate([pit_values(p, t, rng) for p, t in groups])
    assert stats.kstest(u, "uniform").pvalue > 0.01
    t = pit_test(2, groups, rng)
    assert t.tested and t.n == 2000 and t.bins == 20 and t.p_value > 0.001
    # drawn from another prefix's p: u piles up near 1 and the test rejects
    shifted = [(groups[i][0], groups[(i + 1) % 40][1]) for i in range(40)]
    bad = pit_test(2, shifted, rng)
    assert bad.p_value < 1e-10 and bad.mean_u > 0.6


def test_pit_test_small_samples_and_impossible_tokens() -> None:
    rng = np.random.default_rng(2)
    p = np.array([0.6, 0.4, 0.0])
    few = pit_test(3, [(p, np.array([0, 1, 0]))], rng)
    assert not few.tested and few.p_value == 1.0
    impossible = pit_test(3, [(p, np.array([0, 2] + [0] * 60))], rng)
    assert impossible.impossible == 1 and impossible.p_value == 0.0


@pytest.mark.slow
def test_verify_family_false_fail_rate_holds() -> None:
    """A synthetic exact sampler, 4 contexts × positions 1..4 tested per run, Bonferroni at 5 %:
    the run fails at most 5 % of the time (the default 0.001 is checked in the benchmark)."""
    rate, se = null_false_fail_rate(60, seed=3, significance=0.05, contexts=4, samples=300, gamma=3)
    assert rate <= 0.05 + 2 * se + 1e-9, (rate, se)


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
@pytest.mark.parametrize("significance", [0.001])
def test_a_bonus_from_the_wrong_row_is_caught(significance: float) -> None:
    rate, _ = null_false_fail_rate(
        5, seed=4, significance=significance, contexts=4, samples=300, gamma=3, fault=True
    )
    assert rate == 1.0
