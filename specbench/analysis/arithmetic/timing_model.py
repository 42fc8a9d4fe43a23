"""The one timing fit: per-round costs of speculation from measured steps (docs/theory.md §4).

    round(γ) = draft_forwards·T_d + (t0 + t1·γ) + (o0 + o1·γ)

T_t(γ) = t0 + t1·γ is the verify forward over γ + 1 positions, o0 + o1·γ the harness time outside
model forwards, both least-squares fits over rounds (γ = drafted tokens of the round); T_d is the
mean draft step and T_ar the mean baseline decode step. `run`'s analysis, `simulate`, the engine
analysis and `accept` all build a `TimingModel` and predict through `roi` (the one speedup model).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.arithmetic import roi
from specbench.record_line import RecordLine


def linear_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Least squares y ≈ a + b·x; returns (a, b, residuals). One distinct x gives b = 0."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(y) == 0:
        return math.nan, math.nan, y
    if len(np.unique(x)) < 2:
        a = float(y.mean())
        return a, 0.0, y - a
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b), y - (a + b * x)


@dataclass(frozen=True)
class TimingModel:
    """Costs in ms (or in units of T_ar when only a cost ratio is known)."""

    t_ar_ms: float  # one plain decode step: the baseline per-token latency
    t_draft_ms: float  # one draft step
    t0_ms: float  # verify at γ = 0 (+ harness overhead o0)
    t1_ms: float  # verify growth per drafted token (+ overhead growth o1)

    def round_ms(self, gamma: int, draft_forwards: int | None = None) -> float:
        """One round: the draft forwards (γ by default) plus one verify over γ + 1 positions."""
        forwards = gamma if draft_forwards is None else draft_forwards
        return forwards * self.t_draft_ms + self.t0_ms + self.t1_ms * gamma

    def speedup(self, gamma: int, expected_tokens: float) -> float:
        """T_ar / ITL_eff(γ) with ITL_eff = round(γ) / ā(γ); γ = 0 is plain decoding (1)."""
        if gamma == 0:
            return 1.0
        return self.t_ar_ms / roi.itl_from_round(self.round_ms(gamma), expected_tokens)

    def speedup_iid(self, gamma: int, alpha: float) -> float:
        return self.speedup(gamma, roi.expected_tokens(gamma, min(max(alpha, 0.0), 1.0)))

    @property
    def finite(self) -> bool:
        return all(
            math.isfinite(v) for v in (self.t_ar_ms, self.t_draft_ms, self.t0_ms, self.t1_ms)
        )


@dataclass(frozen=True)
class TimingFit:
    model: TimingModel
    verify_t0_ms: float
    verify_t1_ms: float
    overhead_o0_ms: float
    overhead_o1_ms: float
    residual_by_drafted: dict[int, float]
    draft_steps_ms: np.ndarray


def fit_timing(
    baseline_steps_ms: Sequence[float],
    draft_steps_ms: Sequence[float],
    drafted: Sequence[float],
    verify_ms: Sequence[float],
    overhead_ms: Sequence[float] | None = None,
) -> TimingFit:
    """Fit the round cost model from measured steps (rounds given as parallel arrays)."""
    steps = np.asarray(baseline_steps_ms, float)
    draft = np.asarray(draft_steps_ms, float)
    ks = np.asarray(drafted, float)
    t0, t1, resid = linear_fit(ks, np.asarray(verify_ms, float))
    if overhead_ms is not None and len(overhead_ms):
        o0, o1, _ = linear_fit(ks, np.asarray(overhead_ms, float))
    else:
        o0, o1 = 0.0, 0.0
    residual = {int(k): float(resid[ks == k].mean()) for k in np.unique(ks)} if len(ks) else {}
    model = TimingModel(
        float(steps.mean()) if len(steps) else math.nan,
        float(draft.mean()) if len(draft) else 0.0,
        t0 + o0,
        t1 + o1,
    )
    return TimingFit(model, t0, t1, o0, o1, residual, draft)


def fit_from_records(baseline: Sequence[RecordLine], spec: Sequence[RecordLine]) -> TimingFit:
    """The fit over every speculative round of `spec` and the baseline's decode steps."""
    rounds = [r["rounds"] for r in spec]
    return fit_timing(
        [s for r in baseline for s in r.get("step_ms") or []],
        [t for rd in rounds for ts in rd["draft_ms"] for t in ts],
        [k for rd in rounds for k in rd["drafted"]],
        [v for rd in rounds for v in rd["verify_ms"]],
        [o for rd in rounds for o in rd["overhead_ms"]],
    )
