"""verify's statistics without a model (harness/verify/verify.py): the χ² goodness of fit by hand and
against scipy, Bonferroni, and a verify that checked nothing fails."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specbench.analysis.verify.lossless_tests import bonferroni, goodness_of_fit
from specbench.analysis.verify.verify_results import VerifyReport


def test_goodness_of_fit_hand_values() -> None:
    p = np.array([0.5, 0.3, 0.2])
    exact = goodness_of_fit(np.array([50, 30, 20]), p)
    assert (exact.n, exact.chi2, exact.dof, exact.p_value, exact.tv) == (100, 0.0, 2, 1.0, 0.0)
    off = goodness_of_fit(np.array([60, 20, 20]), p)
    assert off.chi2 == pytest.approx(100 / 50 + 100 / 30)  # Σ (obs − exp)² / exp
    assert off.p_value == pytest.approx(np.exp(-off.chi2 / 2))  # χ² with 2 dof
    assert off.tv == pytest.approx(0.1)
    assert off.tv_bound == pytest.approx(0.5 * sum(np.sqrt(p * (1 - p) / 100)))
    # rare tokens pool into "other"; a too-small pool joins the smallest regular bin
    pooled = goodness_of_fit(np.array([90, 5, 3, 2]), np.array([0.9, 0.05, 0.03, 0.02]))
    assert pooled.dof == 2 and pooled.p_value == pytest.approx(1.0)
    tiny = goodness_of_fit(np.array([99, 1, 0]), np.array([0.98, 0.01, 0.01]))
    assert tiny.dof == 0 and tiny.p_value == 1.0  # near-deterministic: nothing to test
    impossible = goodness_of_fit(np.array([99, 1]), np.array([1.0, 0.0]))
    assert impossible.impossible == 1 and impossible.p_value == 0.0


def test_bonferroni() -> None:
    assert bonferroni([0.5, 0.0004, 0.2], 0.001) == (pytest.approx(0.0012), True)
    assert bonferroni([0.5, 0.0002, 0.2], 0.001) == (pytest.approx(0.0006), False)
    assert bonferroni([], 0.001) == (1.0, True)


def test_a_verify_that_checked_nothing_fails() -> None:
    empty = VerifyReport("c", "t", ["model"], "exact", True, 0.001, [], [])
    assert empty.checks_run == 0 and not empty.passed


def test_chi2_oracle_agrees_with_scipy() -> None:
    counts = np.array([30, 25, 20, 15, 10])
    p = np.array([0.3, 0.25, 0.2, 0.15, 0.1])
    shifted = counts + np.array([8, -2, -2, -2, -2])
    fit = goodness_of_fit(shifted, p)
    ref = stats.chisquare(shifted, p * shifted.sum())
    assert fit.chi2 == pytest.approx(ref.statistic) and fit.p_value == pytest.approx(ref.pvalue)
