"""The one speculation model: tokens per round, ITL, speedup, optimal γ, break-even points.

Pure functions (numpy + scipy root finding). `specbench roi`, `run`'s analysis, `simulate`, the
engine analysis and `accept` all predict through these (with costs from
`analysis.arithmetic.timing_model`). Formulas from docs/theory.md §3–4:

    ā(γ, α)     = (1 − α^{γ+1}) / (1 − α)          (γ + 1 at α = 1; Leviathan et al. 2023, eq. 1)
    T_t(γ)      = T_ar + slope·γ                    (slope 0 = the textbook "verify costs one step")
    round(γ)    = γ·T_d + T_t(γ)
    ITL_eff(γ)  = round(γ) / ā(γ),   speedup(γ) = T_ar / ITL_eff(γ)

Heterogeneous acceptance (docs/theory.md §3): α varies across prompts, and a γ run spends
L_p / ā_p(γ) rounds on a prompt of L_p tokens, so the pooled tokens per round is the token-weighted
harmonic mean Σ L_p / Σ (L_p / ā_p(γ)) — never ā(pooled α) nor the round-weighted mean.

"Off" (γ = 0, speedup 1) is always a candidate for the optimum. Times are in ms, or in units of T_ar
when the caller works with a cost ratio c = T_d / T_ar (then T_ar = 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq


def expected_tokens(gamma: int, alpha: float) -> float:
    """ā(γ, α): expected tokens emitted per round (accepted drafts + the correction/bonus token)."""
    if gamma < 0:
        raise ValueError("gamma must be >= 0")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError("alpha must be in [0, 1]")
    if alpha == 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def verify_ms(gamma: int, t_target_ms: float, verify_slope_ms: float = 0.0) -> float:
    """T_t(γ) = T_ar + slope·γ: one target forward over γ + 1 positions."""
    return t_target_ms + verify_slope_ms * gamma


def round_ms(
    gamma: int, t_target_ms: float, t_draft_ms: float, verify_slope_ms: float = 0.0
) -> float:
    """γ draft steps plus one verify."""
    return gamma * t_draft_ms + verify_ms(gamma, t_target_ms, verify_slope_ms)


def itl_from_round(round_time_ms: float, expected: float) -> float:
    """ITL_eff = round time / ā: the time per emitted token."""
    return round_time_ms / expected


def itl_ms(
    gamma: int, expected: float, t_target_ms: float, t_draft_ms: float, verify_slope_ms: float = 0.0
) -> float:
    """ITL_eff(γ) = (γ·T_d + T_t(γ)) / ā; γ = 0 is plain decoding (T_ar)."""
    if gamma == 0:
        return t_target_ms
    return itl_from_round(round_ms(gamma, t_target_ms, t_draft_ms, verify_slope_ms), expected)


def pooled_tokens_per_round(
    lengths: Sequence[float] | np.ndarray, expected: Sequence[float] | np.ndarray
) -> float:
    """Σ L_p / Σ (L_p / ā_p): tokens per round over prompts of L_p tokens with ā_p each."""
    length = np.asarray(lengths, float)
    per = np.asarray(expected, float)
    keep = (length > 0) & np.isfinite(per) & (per > 0)
    if not keep.any():
        return float("nan")
    return float(length[keep].sum() / (length[keep] / per[keep]).sum())


def pooled_expected_tokens_iid(
    gamma: int, lengths: Sequence[float] | np.ndarray, alphas: Sequence[float] | np.ndarray
) -> float:
    """The iid ā(γ, α_p) per prompt (or request), pooled by tokens."""
    per = [expected_tokens(gamma, min(max(float(a), 0.0), 1.0)) for a in alphas]
    return pooled_tokens_per_round(lengths, per)


def speedup(
    gamma: int, alpha: float, t_target_ms: float, t_draft_ms: float, verify_slope_ms: float = 0.0
) -> float:
    """T_ar / ITL_eff(γ) under iid acceptance α."""
    expected = expected_tokens(gamma, alpha)
    return t_target_ms / itl_ms(gamma, expected, t_target_ms, t_draft_ms, verify_slope_ms)


def _solve_expected_for_alpha(gamma: int, target_expected: float) -> float:
    """The α in [0, 1] with ā(γ, α) = target_expected (ā is strictly increasing in α)."""
    if target_expected <= 1.0:
        return 0.0
    if target_expected >= gamma + 1:
        return 1.0
    return float(
        brentq(lambda a: expected_tokens(gamma, a) - target_expected, 0.0, 1.0, xtol=1e-12)
    )


def alpha_from_accepted(tau: float, gamma: int) -> float:
    """Invert ā: the iid α that gives a measured mean tokens per round τ at γ (τ in [1, γ + 1])."""
    if gamma < 1:
        raise ValueError("gamma must be >= 1")
    if not 1.0 <= tau <= gamma + 1:
        raise ValueError(f"accepted length must be in [1, {gamma + 1}] at gamma {gamma}")
    return _solve_expected_for_alpha(gamma, tau)


def break_even_alpha(
    gamma: int, t_target_ms: float, t_draft_ms: float, verify_slope_ms: float = 0.0
) -> float | None:
    """The α at which speedup(γ) = 1 (speculation pays above it); None if it never pays at this γ.

    speedup = 1 ⇔ ā(γ, α) = round(γ) / T_ar.
    """
    needed = round_ms(gamma, t_target_ms, t_draft_ms, verify_slope_ms) / t_target_ms
    if needed > gamma + 1:
        return None
    return _solve_expected_for_alpha(gamma, needed)


def break_even_at_cost(gamma: int, round_steps: float) -> float | None:
    """The α from which a round costing `round_steps` target steps pays at γ: ā(γ, α) =
    round_steps; 0 when a round costs at most one step, None when no α reaches it."""
    if round_steps > gamma + 1:
        return None
    return 0.0 if round_steps <= 1.0 else alpha_from_accepted(round_steps, gamma)


def break_even_cost_ratio(gamma: int, alpha: float, verify_slope_ratio: float = 0.0) -> float:
    """The largest c = T_d / T_ar at which speculation still pays at (γ, α).

    speedup ≥ 1 ⇔ γ·c + 1 + s·γ ≤ ā  ⇔  c ≤ (ā − 1 − s·γ) / γ, with s = slope / T_ar.
    Negative means it cannot pay even with a free draft.
    """
    return (expected_tokens(gamma, alpha) - 1.0 - verify_slope_ratio * gamma) / gamma


@dataclass(frozen=True)
class GammaRow:
    gamma: int
    expected_tokens: float
    round_ms: float
    itl_ms: float
    speedup: float
    break_even_alpha: float | None
    break_even_cost_ratio: float


@dataclass(frozen=True)
class Best:
    gamma: int  # 0 = speculation off
    speedup: float
    itl_ms: float


def optimal(rows: list[GammaRow], t_target_ms: float) -> Best:
    """argmax speedup over the rows, with "off" (γ = 0, speedup 1, ITL = T_ar) always a candidate."""
    best = Best(0, 1.0, t_target_ms)
    for row in rows:
        if row.speedup > best.speedup:
            best = Best(row.gamma, row.speedup, row.itl_ms)
    return best


@dataclass(frozen=True)
class Scenario:
    """One roi scenario: an α (or a measured τ at a γ), the timings, one row per γ and the optimum."""

    alpha: float
    accepted: float | None
    t_target_ms: float
    t_draft_ms: float
    verify_slope_ms: float
    rows: list[GammaRow]
    best: Best

    @property
    def verdict(self) -> str:
        return "on" if self.best.gamma > 0 else "off"


def scenario(
    alpha: float,
    gammas: list[int],
    t_target_ms: float,
    t_draft_ms: float,
    verify_slope_ms: float = 0.0,
    accepted: float | None = None,
) -> Scenario:
    """Tabulate the model for each γ and pick the optimum."""
    rows = []
    for g in gammas:
        expected = expected_tokens(g, alpha)
        itl = itl_ms(g, expected, t_target_ms, t_draft_ms, verify_slope_ms)
        rows.append(
            GammaRow(
                gamma=g,
                expected_tokens=expected,
                round_ms=round_ms(g, t_target_ms, t_draft_ms, verify_slope_ms),
                itl_ms=itl,
                speedup=t_target_ms / itl,
                break_even_alpha=break_even_alpha(g, t_target_ms, t_draft_ms, verify_slope_ms),
                break_even_cost_ratio=break_even_cost_ratio(
                    g, alpha, verify_slope_ms / t_target_ms
                ),
            )
        )
    return Scenario(
        alpha, accepted, t_target_ms, t_draft_ms, verify_slope_ms, rows, optimal(rows, t_target_ms)
    )


@dataclass(frozen=True)
class Economics:
    """Batch-size-1 serving cost with and without speculation, and the draft's memory share."""

    usd_per_million_tokens_off: float | None
    usd_per_million_tokens_on: float | None
    draft_memory_share: float | None


def economics(
    itl_off_ms: float,
    itl_on_ms: float,
    gpu_hour_usd: float | None,
    gpus: int = 1,
    draft_memory_gib: float | None = None,
    gpu_memory_gib: float | None = None,
) -> Economics:
    """USD per 10⁶ output tokens = hourly cost / tokens per hour × 10⁶ (tokens/h = 3.6e6 / ITL_ms)."""

    def per_million(itl: float) -> float | None:
        if gpu_hour_usd is None:
            return None
        return gpu_hour_usd * gpus / (3.6e6 / itl) * 1e6

    share = None
    if draft_memory_gib is not None and gpu_memory_gib is not None:
        share = draft_memory_gib / (gpu_memory_gib * gpus)
    return Economics(per_million(itl_off_ms), per_million(itl_on_ms), share)
