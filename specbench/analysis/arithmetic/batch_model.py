"""The batch-aware step-cost model: the time of one engine step with b sequences in flight at draft
length γ, fitted from an engine run's measured cells, and the throughput it implies
(docs/theory.md §15).

One step drafts γ tokens for each of the b sequences (γ sequential draft forwards over b rows)
and verifies b·(γ + 1) tokens in one target forward:

    T(b, γ) = V(b, γ) + D(b, γ)
    V(b, γ) = v0 + v_b·b + v_c·max(0, b·(γ + 1) − n_knee)    verify: flat in tokens while
                                                              memory-bound, linear once compute-bound
    D(b, γ) = γ·(d0 + d_b·b)                                  draft (0 for the engine without
                                                              speculation, γ = 0)

v_b is the per-sequence memory cost (each sequence's KV cache is read once a step), v_c the cost
of a token once the forward is compute-bound, n_knee the tokens per step where it becomes so.
Coefficients are non-negative (scipy's NNLS on relative errors); n_knee is chosen from a grid of
the measured token counts (and "never", no compute-bound term) by the smallest relative squared
error. The measured step time of a cell is its pooled TPOT (Σ decode ms / Σ decode tokens) × τ,
τ the cell's mean accepted length (1 without speculation): a sequence gains τ tokens a step.

Throughput. In a step each in-flight sequence i gains ā_i(γ) tokens, so the step yields
Σ_i ā_i(γ) / T(b, γ) tokens/s (`throughput_per_step`). In steady state (closed loop, finished
sequences replaced) a sequence is in flight for L_i / ā_i steps, so the in-flight set is
step-weighted and E[Σ_i ā_i] = b·Σ L_i / Σ (L_i / ā_i) — the token-pooled (harmonic) mean of the
per-sequence ā_i(γ) (`inflight_accept_length`), neither the plain mean of ā_i nor ā(pooled α).

The model's error is measured leave-one-out: each cell is predicted by the fit to the others.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

MIN_CELLS = 4  # fewer measured cells: no fit
NO_KNEE = math.inf


@dataclass(frozen=True)
class StepCell:
    """One measured cell: b sequences in flight at draft length γ, its step time (ms) and τ."""

    b: int
    gamma: int
    step_ms: float
    tau: float = 1.0


@dataclass(frozen=True)
class StepCostModel:
    """T(b, γ) = v0 + v_b·b + v_c·max(0, b(γ+1) − n_knee) + γ·(d0 + d_b·b), in ms."""

    v0_ms: float
    vb_ms: float
    vc_ms: float
    d0_ms: float
    db_ms: float
    knee_tokens: float  # inf: the verify never became compute-bound in the measured range

    def verify_ms(self, b: float, gamma: int) -> float:
        n = b * (gamma + 1)
        over = max(0.0, n - self.knee_tokens) if math.isfinite(self.knee_tokens) else 0.0
        return self.v0_ms + self.vb_ms * b + self.vc_ms * over

    def draft_ms(self, b: float, gamma: int) -> float:
        return gamma * (self.d0_ms + self.db_ms * b)

    def predict_step_ms(self, b: float, gamma: int) -> float:
        return self.verify_ms(b, gamma) + self.draft_ms(b, gamma)

    def predict_step_time(self, b: float, gamma: int) -> float:
        """Seconds per engine step with b sequences in flight at draft length γ."""
        return self.predict_step_ms(b, gamma) / 1000.0


def throughput_per_step(accept_lengths: Sequence[float], step_time_s: float) -> float:
    """Output tokens/s of one step: Σ_i ā_i over the sequences in flight ÷ the step time."""
    if step_time_s <= 0 or not math.isfinite(step_time_s):
        raise ValueError(f"step time must be positive, got {step_time_s}")
    return float(np.sum(np.asarray(accept_lengths, float))) / step_time_s


def inflight_accept_length(tokens: Sequence[float], accept_lengths: Sequence[float]) -> float:
    """E[ā] of a sequence in flight at a random step: Σ L_i / Σ (L_i / ā_i) (module docstring)."""
    lengths = np.asarray(tokens, float)
    a = np.asarray(accept_lengths, float)
    if len(lengths) == 0 or len(lengths) != len(a) or np.any(a < 1.0):
        raise ValueError("one output length and one ā ≥ 1 per sequence")
    return float(lengths.sum() / (lengths / a).sum())


def predicted_throughput(model: StepCostModel, b: float, gamma: int, accept_length: float) -> float:
    """Steady-state output tokens/s with b in flight: b·ā_inflight(γ) / T(b, γ)."""
    return b * accept_length / model.predict_step_time(b, gamma)


def _design(cells: Sequence[StepCell], knee: float) -> np.ndarray:
    """(cells, 5): the columns multiplying v0, v_b, v_c, d0, d_b."""
    rows = []
    for c in cells:
        n = c.b * (c.gamma + 1)
        over = max(0.0, n - knee) if math.isfinite(knee) else 0.0
        rows.append([1.0, c.b, over, c.gamma, c.gamma * c.b])
    return np.asarray(rows, float)


def _knees(cells: Sequence[StepCell]) -> list[float]:
    tokens = sorted({c.b * (c.gamma + 1) for c in cells})
    return [NO_KNEE, 0.0, *(float(t) for t in tokens[:-1])]


def fit_step_costs(cells: Sequence[StepCell]) -> StepCostModel | None:
    """The least relative-squared-error model with non-negative coefficients; None with fewer than
    MIN_CELLS cells or fewer than two batch sizes."""
    cells = [c for c in cells if c.step_ms > 0 and math.isfinite(c.step_ms)]
    if len(cells) < MIN_CELLS or len({c.b for c in cells}) < 2:
        return None
    y = np.asarray([c.step_ms for c in cells])
    w = 1.0 / y  # relative error: a 1 ms miss on a 2 ms step counts like 10 ms on 20 ms
    best: tuple[float, np.ndarray, float] | None = None
    for knee in _knees(cells):
        x = _design(cells, knee)
        coef, _ = nnls(x * w[:, None], y * w)
        sse = float(np.sum(((x @ coef - y) * w) ** 2))
        if best is None or sse < best[0] - 1e-12:
            best = (sse, coef, knee)
    assert best is not None
    _, coef, knee = best
    if coef[2] == 0.0:
        knee = NO_KNEE  # no compute-bound term was needed
    v0, vb, vc, d0, db = (float(v) for v in coef)
    return StepCostModel(v0, vb, vc, d0, db, knee)


@dataclass(frozen=True)
class CellError:
    cell: StepCell
    fitted_ms: float  # the fit to every cell
    loo_ms: float | None  # the fit to every other cell (None: too few cells left)

    @property
    def loo_rel_error(self) -> float | None:
        if self.loo_ms is None:
            return None
        return (self.loo_ms - self.cell.step_ms) / self.cell.step_ms


def leave_one_out(cells: Sequence[StepCell], model: StepCostModel) -> list[CellError]:
    """Each cell against the full fit and against the fit without it."""
    out = []
    for i, c in enumerate(cells):
        rest = fit_step_costs([d for j, d in enumerate(cells) if j != i])
        out.append(
            CellError(
                c,
                model.predict_step_ms(c.b, c.gamma),
                rest.predict_step_ms(c.b, c.gamma) if rest is not None else None,
            )
        )
    return out
