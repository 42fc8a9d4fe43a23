"""Estimators, intervals, fits and the verdict on synthetic records with known truth."""

from __future__ import annotations

import numpy as np
import pytest

from specbench.analysis.arithmetic import roi
from specbench.analysis.arithmetic.timing_model import linear_fit
from specbench.analysis.documents.results_model import RunEnv, RunResults
from specbench.analysis.estimators import acceptance
from specbench.analysis.pipeline.results import build_results
from specbench.analysis.stats.resampling import mean_ci, prompts_needed, ratio_ci
from specbench.config.stored import StoredConfig

from .synthetic import baseline_record, spec_record

CONFIG = StoredConfig.model_validate(
    {
        "name": "synthetic",
        "workloads": [{"name": "w", "weight": 1.0}],
        "decision": {"margin": 0.05, "bootstrap": 1000},
    }
)


def test_ratio_ci_hand_values() -> None:
    num = np.array([1.0, 2.0, 3.0, 1.5, 2.5, 2.0])
    est = ratio_ci(num, np.full(6, 2.0), n_boot=2000)
    assert est.value == pytest.approx(1.0)
    # six units: bounded by the Student-t interval on 5 degrees of freedom, widened by the
    # bootstrap-t's heavier tails at this size (1 ± 2.571 · se, se = sd/2/√6)
    se = num.std(ddof=1) / 2 / np.sqrt(6)
    assert 1.0 - 2.0 * 2.571 * se < est.lo < 1.0 - 2.571 * se / 2
    assert 1.0 + 2.571 * se / 2 < est.hi < 1.0 + 2.0 * 2.571 * se
    m = mean_ci(np.array([4.0, 4.0, 4.0]))
    assert (m.value, m.lo, m.hi) == (4.0, 4.0, 4.0)


def test_prompts_needed_scales_with_inverse_square() -> None:
    assert prompts_needed(20, 0.1, 0.05) == 80
    assert prompts_needed(20, 0.04, 0.05) == 20


def test_linear_fit_recovers_t0_t1() -> None:
    rng = np.random.default_rng(0)
    k = rng.integers(1, 9, size=4000).astype(float)
    y = 5.6 + 0.14 * k + rng.normal(0, 0.2, size=k.size)
    a, b, resid = linear_fit(k, y)
    assert a == pytest.approx(5.6, abs=0.02) and b == pytest.approx(0.14, abs=0.005)
    assert abs(resid.mean()) < 1e-9


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
@pytest.mark.parametrize("alpha", [0.3, 0.6, 0.85])
def test_iid_estimators_unbiased(alpha: float) -> None:
    rng = np.random.default_rng(1)
    gamma = 4
    recs = [spec_record(rng, f"p{i}", gamma, [alpha] * gamma, 100) for i in range(200)]
    est = acceptance.estimate_alpha(recs, gamma, n_boot=200, level=0.95)
    assert est.exact_beta.value == pytest.approx(alpha, abs=0.005)
    assert est.accepted_tested.value == pytest.approx(alpha, abs=0.005)
    assert est.from_accepted_length is not None
    assert est.from_accepted_length.value == pytest.approx(alpha, abs=0.005)
    # accepted/proposed is biased low exactly as docs/theory.md §2 says: α(1 − α^γ) / (γ(1 − α))
    expected_ratio = alpha * (1 - alpha**gamma) / (gamma * (1 - alpha))
    assert est.accepted_proposed.value == pytest.approx(expected_ratio, abs=0.005)
    assert est.accepted_proposed.value < alpha


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_position_decaying_acceptance_per_position() -> None:
    rng = np.random.default_rng(2)
    alphas = [0.9, 0.8, 0.7, 0.6, 0.5]
    recs = [spec_record(rng, f"p{i}", 5, alphas, 200) for i in range(150)]
    acc, dra = acceptance.all_rounds(recs)
    rates = acceptance.per_position_acceptance(acc, dra, 5)
    for got, want in zip(rates, alphas, strict=True):
        assert got == pytest.approx(want, abs=0.01)
    # verified-position exact β equals accepted/tested in expectation here too
    est = acceptance.estimate_alpha(recs, 5, n_boot=200, level=0.95)
    assert est.exact_beta.value == pytest.approx(est.accepted_tested.value, abs=0.005)


@pytest.mark.slow  # seconds, not milliseconds: make test runs it, make test-fast does not
def test_ci_covers_true_alpha_at_nominal_rate() -> None:
    alpha, gamma, covered, reps = 0.6, 4, 0, 300
    rng = np.random.default_rng(3)
    for _ in range(reps):
        recs = [spec_record(rng, f"p{i}", gamma, [alpha] * gamma, 8) for i in range(60)]
        est = acceptance.estimate_alpha(recs, gamma, n_boot=1000, level=0.95)
        covered += est.exact_beta.lo <= alpha <= est.exact_beta.hi
    assert 0.93 <= covered / reps <= 0.97, covered / reps


def test_truncation_curve_matches_iid_curve() -> None:
    rng = np.random.default_rng(4)
    alpha = 0.7
    recs = [spec_record(rng, f"p{i}", 8, [alpha] * 8, 100) for i in range(100)]
    curve = acceptance.truncation_curve(recs, 8)
    for g in range(1, 9):
        # sampling error of a mean of ≤ 8 bounded counts over 10 000 rounds is < 0.03
        assert curve[g] == pytest.approx(roi.expected_tokens(g, alpha), abs=0.04)


def _run(t_draft: float, t_ar: float = 10.0, alpha: float = 0.8) -> RunResults:
    rng = np.random.default_rng(5)
    recs = []
    for i in range(30):
        recs.append(baseline_record(f"p{i}", t_ar * (1 + 0.02 * rng.standard_normal())))
        for g in (1, 2, 4):
            recs.append(
                spec_record(rng, f"p{i}", g, [alpha] * g, 20, t_draft=t_draft, t0=t_ar, t1=0.2)
            )
    return build_results(recs, CONFIG, RunEnv())


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_verdict_on_with_cheap_draft_and_off_with_slow_draft() -> None:
    fast = _run(t_draft=0.5).workloads[0]
    assert fast.recommendation.verdict == "on" and fast.recommendation.speedup is not None
    assert (fast.recommendation.speedup.ci95[0] or 0.0) > 1.05
    assert fast.timing.verify_fit.t0_ms == pytest.approx(10.0, abs=1e-6)
    assert fast.timing.verify_fit.t1_ms_per_token == pytest.approx(0.2, abs=1e-6)
    slow = _run(t_draft=9.0).workloads[0]
    assert slow.recommendation.verdict == "off" and slow.recommendation.gamma == 0
    best = slow.recommendation.best_measured
    assert best is not None and best.speedup is not None and (best.speedup.value or 0.0) < 1.0
    # predictions agree with the (noise-free) measured speedup within a few percent
    for row in fast.gammas:
        if row.measured:
            assert row.measured_speedup is not None
            assert row.predicted_speedup.empirical == pytest.approx(
                row.measured_speedup.value, rel=0.05
            )
