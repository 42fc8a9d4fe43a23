"""The batch-aware step-cost model (analysis/arithmetic/batch_model.py, docs/theory.md §15): recovers known
synthetic step costs, says where its error was measured, and the in-flight acceptance it uses is
the step-weighted one a closed loop actually sees."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.analysis.arithmetic.batch_model import (
    StepCell,
    StepCostModel,
    fit_step_costs,
    inflight_accept_length,
    leave_one_out,
    predicted_throughput,
    throughput_per_step,
)

TRUTH = StepCostModel(v0_ms=5.0, vb_ms=0.2, vc_ms=0.05, d0_ms=1.0, db_ms=0.02, knee_tokens=64.0)
GRID = [(b, g) for b in (1, 2, 4, 8, 16, 32, 64) for g in (0, 1, 2, 4)]


def _cells(model: StepCostModel, noise: float = 0.0, seed: int = 0) -> list[StepCell]:
    rng = np.random.default_rng(seed)
    return [
        StepCell(b, g, model.predict_step_ms(b, g) * float(np.exp(rng.normal(0, noise))))
        for b, g in GRID
    ]


def test_recovers_known_step_costs_exactly() -> None:
    fit = fit_step_costs(_cells(TRUTH))
    assert fit is not None
    assert fit.knee_tokens == 64.0
    for name in ("v0_ms", "vb_ms", "vc_ms", "d0_ms", "db_ms"):
        assert getattr(fit, name) == pytest.approx(getattr(TRUTH, name), rel=1e-6, abs=1e-9)
    # off the measured grid: b = 48, γ = 3 (192 tokens, compute-bound)
    assert fit.predict_step_time(48, 3) == pytest.approx(TRUTH.predict_step_time(48, 3), rel=1e-6)


def test_noisy_cells_predict_within_the_noise_and_loo_measures_it() -> None:
    cells = _cells(TRUTH, noise=0.03, seed=1)
    fit = fit_step_costs(cells)
    assert fit is not None
    for b, g in [(3, 2), (24, 1), (48, 3)]:
        assert fit.predict_step_ms(b, g) == pytest.approx(TRUTH.predict_step_ms(b, g), rel=0.08)
    errs = [abs(e.loo_rel_error) for e in leave_one_out(cells, fit) if e.loo_rel_error is not None]
    assert len(errs) == len(cells)
    assert 0.005 < float(np.median(errs)) < 0.1  # about the 3 % noise, not 0, not wild


def test_memory_bound_only_has_no_knee() -> None:
    flat = StepCostModel(4.0, 0.3, 0.0, 0.5, 0.01, math.inf)
    fit = fit_step_costs(_cells(flat))
    assert fit is not None and math.isinf(fit.knee_tokens)
    assert fit.predict_step_ms(64, 4) == pytest.approx(flat.predict_step_ms(64, 4), rel=1e-6)


def test_too_few_cells_or_one_batch_size_is_no_fit() -> None:
    assert fit_step_costs([StepCell(1, g, 5.0 + g) for g in (0, 1, 2, 4)]) is None
    assert fit_step_costs([StepCell(1, 0, 5.0), StepCell(4, 0, 6.0), StepCell(1, 2, 7.0)]) is None


def test_throughput_per_step_hand_computed() -> None:
    assert throughput_per_step([2.0, 3.0, 1.0], 0.01) == pytest.approx(600.0)
    with pytest.raises(ValueError):
        throughput_per_step([1.0], 0.0)
    # b = 4 sequences at ā = 2.5, 10 ms a step → 1000 tokens/s
    m = StepCostModel(10.0, 0.0, 0.0, 0.0, 0.0, math.inf)
    assert predicted_throughput(m, 4, 2, 2.5) == pytest.approx(1000.0)


def test_inflight_acceptance_is_step_weighted_as_a_closed_loop_shows() -> None:
    """Two kinds of sequence (ā = 4 and ā = 1, 96 tokens each) in a closed loop of b = 8 slots:
    the tokens per slot per step converge to Σ L / Σ (L / ā) = 1.6, not the plain mean 2.5."""
    lengths, accept = [96.0, 96.0], [4.0, 1.0]
    want = inflight_accept_length(lengths, accept)
    assert want == pytest.approx(192.0 / (24.0 + 96.0))
    rng = np.random.default_rng(0)
    slots = [[float(a), 0.0] for a in rng.choice(accept, 8)]  # (ā, tokens so far)
    tokens = steps = 0.0
    for _ in range(20_000):
        for s in slots:
            s[1] += s[0]
            tokens += s[0]
            if s[1] >= 96.0:
                s[0], s[1] = float(rng.choice(accept)), 0.0
        steps += 1
    assert tokens / (steps * len(slots)) == pytest.approx(want, rel=0.03)
    assert abs(want - np.mean(accept)) > 0.5
