"""The rollout plan of one bucket × setting: ā(γ) and the speedup it implies for γ = 1..γ_max,
the point-optimal γ, and the ON/OFF verdict (docs/theory.md §3–4, §8). Pure numpy.

Speedup model (the one in `analysis.roi`), per request r with α_r and L_r scored tokens, pooled
by tokens because a deployment spends L_r / ā(γ, α_r) rounds on request r:
    ā_pool(γ) = Σ L_r / Σ (L_r / ā(γ, α_r)),   ā(γ, α) = (1 − α^{γ+1}) / (1 − α),
    round(γ) = γ·T_d + verify_base + slope·γ,    speedup(γ) = T_ar · ā_pool(γ) / round(γ).
(ā at the pooled α instead is optimistic whenever α varies across requests: ā is concave in α.)
Timings are taken as exact; the interval of ā_pool(γ) is a ratio of sums over requests. The
verdict is selection-aware like `run`'s (docs/theory.md §8): ON only if some γ's simultaneous
(max-T over γ = 1..γ_max) lower bound exceeds 1 + margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specbench.analysis import roi
from specbench.analysis.rollout.timing import TimeModel
from specbench.analysis.stats import (
    DEFAULT_SEED,
    Estimate,
    log_linear_replicates,
    ratio_ci,
    simultaneous_lower,
)


def predicted_speedup(gamma: int, alpha: float, tm: TimeModel) -> float:
    """T_ar / ITL_eff(γ) under iid acceptance α; γ = 0 is 1."""
    return tm.timing.speedup_iid(gamma, alpha)


def break_even_alpha(gamma: int, tm: TimeModel) -> float | None:
    """α at which speedup(γ) = 1: ā(γ, α) = round(γ) / T_ar; None when no α reaches it."""
    needed = tm.timing.round_ms(gamma) / tm.t_target_ms
    if needed > gamma + 1:
        return None
    return 0.0 if needed <= 1.0 else roi.alpha_from_accepted(needed, gamma)


def _clip(a: float) -> float:
    return min(max(a, 0.0), 1.0)


def _map(alpha: Estimate, fn: Any) -> Estimate:
    """fn applied to the value and both ends (fn increasing in α)."""
    ends = [
        fn(_clip(x)) if math.isfinite(x) else math.nan for x in (alpha.value, alpha.lo, alpha.hi)
    ]
    return Estimate(*ends)


@dataclass(frozen=True)
class GammaOption:
    gamma: int
    expected_tokens: Estimate
    speedup: Estimate
    itl_ms: Estimate  # in the time model's units


@dataclass(frozen=True)
class RolloutPlan:
    verdict: str  # "on" | "off"
    gamma: int  # γ to deploy; 0 = off
    best_gamma: int  # the speedup-maximising γ (0 when none beats plain decoding)
    speedup: Estimate  # at best_gamma (1 when it is 0)
    itl_baseline_ms: float
    itl_ms: Estimate  # at best_gamma
    break_even_alpha: float | None  # at best_gamma (or at γ = 1 when it is 0)
    reason: str
    options: list[GammaOption]
    warnings: list[str] = field(default_factory=list)


def _pooled_options(
    alphas: np.ndarray,
    tokens: np.ndarray,
    tm: TimeModel,
    gamma_max: int,
    level: float,
    n_boot: int,
    seed: int,
) -> tuple[list[GammaOption], np.ndarray]:
    """Per γ: ā_pool(γ) = Σ L_r / Σ (L_r / ā(γ, α_r)) with its interval, the speedup and ITL it
    implies, and the simultaneous (max-T over γ) lower bounds of the speedups."""
    a = np.clip(alphas, 0.0, 1.0)
    per_gamma = [
        [tokens, tokens / np.asarray([roi.expected_tokens(g, float(x)) for x in a])]
        for g in range(1, gamma_max + 1)
    ]
    rep = log_linear_replicates(per_gamma, (1.0, -1.0), n_boot, seed)
    bounds, _ = simultaneous_lower(rep, level)
    options, speed_bounds = [], []
    for g in range(1, gamma_max + 1):
        expected = ratio_ci(per_gamma[g - 1][0], per_gamma[g - 1][1], n_boot, level, seed)
        per_token = tm.t_target_ms / tm.timing.round_ms(g)
        speed = Estimate(*(x * per_token for x in (expected.value, expected.lo, expected.hi)))
        itl = Estimate(
            *(tm.t_target_ms / x if x > 0 else math.nan for x in (speed.value, speed.hi, speed.lo))
        )
        options.append(GammaOption(g, expected, speed, itl))
        speed_bounds.append(bounds[g - 1] * per_token)
    return options, np.asarray(speed_bounds)


def plan_rollout(
    alpha: Estimate,
    tm: TimeModel,
    gamma_max: int,
    margin: float,
    per_request: tuple[np.ndarray, np.ndarray] | None = None,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = DEFAULT_SEED,
) -> RolloutPlan:
    """Tabulate γ = 1..gamma_max, pick the point-optimal γ (off is a candidate), and decide.

    With `per_request` = (α_r, L_r) the prediction pools ā per request and the verdict uses the
    simultaneous lower bound over γ (module docstring). With α alone (no request detail) the iid
    model is applied to α's value and ends, and the verdict uses the chosen γ's interval.
    """
    if gamma_max < 1:
        raise ValueError("gamma_max must be >= 1")
    decision_bounds: np.ndarray | None = None
    if per_request is not None and len(per_request[0]) >= 2:
        options, decision_bounds = _pooled_options(
            np.asarray(per_request[0], float),
            np.asarray(per_request[1], float),
            tm,
            gamma_max,
            level,
            n_boot,
            seed,
        )
    else:
        options = []
        for g in range(1, gamma_max + 1):
            speed = _map(alpha, lambda a, g=g: predicted_speedup(g, a, tm))
            itl = Estimate(
                *(
                    tm.t_target_ms / s if s > 0 else math.nan
                    for s in (speed.value, speed.hi, speed.lo)
                )
            )
            options.append(
                GammaOption(g, _map(alpha, lambda a, g=g: roi.expected_tokens(g, a)), speed, itl)
            )
    top = max(options, key=lambda o: o.speedup.value if math.isfinite(o.speedup.value) else -1.0)
    warnings = []
    if math.isfinite(alpha.value) and alpha.value < 0.4:
        warnings.append(
            f"α = {alpha.value:.2f} < 0.4: speculation often costs latency at such rates"
        )
    if not math.isfinite(top.speedup.value) or top.speedup.value <= 1.0:
        sp = top.speedup
        reason = (
            f"no γ ≤ {gamma_max} beats plain decoding: the best, γ={top.gamma}, predicts "
            f"{sp.value:.2f}×; off avoids a {(1 / sp.value - 1) * 100:.0f} % longer ITL"
            if math.isfinite(sp.value) and sp.value > 0
            else "α is undefined (no scored positions)"
        )
        return RolloutPlan(
            "off",
            0,
            0,
            Estimate(1.0, 1.0, 1.0),
            tm.t_target_ms,
            Estimate(tm.t_target_ms, tm.t_target_ms, tm.t_target_ms),
            break_even_alpha(1, tm),
            reason,
            options,
            warnings,
        )
    if top.expected_tokens.value < 1.5:
        warnings.append(
            f"ā = {top.expected_tokens.value:.2f} tokens per round at γ={top.gamma} (< 1.5)"
        )
    if decision_bounds is not None:
        clearing = [o for o, b in zip(options, decision_bounds, strict=True) if b > 1.0 + margin]
        if clearing:
            chosen = max(clearing, key=lambda o: o.speedup.value)
            bound = decision_bounds[chosen.gamma - 1]
            verdict, gamma = "on", chosen.gamma
            reason = (
                f"simultaneous lower bound {bound:.3f} over γ = 1..{gamma_max} > 1 + margin "
                f"{margin:g}"
            )
            top = chosen
        else:
            bound = decision_bounds[top.gamma - 1]
            verdict, gamma = "off", 0
            reason = (
                f"γ={top.gamma} predicts {top.speedup.value:.2f}× but its simultaneous lower bound "
                f"{bound:.3f} is not above 1 + margin {margin:g}"
            )
    else:
        lo = top.speedup.lo
        if math.isfinite(lo) and lo > 1.0 + margin:
            verdict, gamma = "on", top.gamma
            reason = f"speedup CI low end {lo:.3f} > 1 + margin {margin:g}"
        else:
            verdict, gamma = "off", 0
            reason = (
                f"γ={top.gamma} predicts {top.speedup.value:.2f}× but its CI low end {lo:.3f} is "
                f"not above 1 + margin {margin:g}"
                if math.isfinite(lo)
                else f"γ={top.gamma} predicts {top.speedup.value:.2f}× but one request gives no "
                "confidence interval"
            )
    return RolloutPlan(
        verdict,
        gamma,
        top.gamma,
        top.speedup,
        tm.t_target_ms,
        top.itl_ms,
        break_even_alpha(top.gamma, tm),
        reason,
        options,
        warnings,
    )


def break_even_cost(plan: RolloutPlan, tm: TimeModel) -> tuple[int, Estimate] | None:
    """(γ, c*): the largest draft cost ratio T_d / T_ar at which speculation still pays, at the γ
    that tolerates the most, with the interval that ā(γ)'s interval implies (c* rises with ā).
    None when the verify is not priced as T_ar + slope·γ (the break-even model of `roi`)."""
    if not plan.options or not math.isclose(tm.verify_base_ms, tm.t_target_ms):
        return None
    slope = tm.verify_slope_ms / tm.t_target_ms

    def c(gamma: int, tokens: float) -> float:
        if not math.isfinite(tokens):
            return math.nan
        tau = min(max(tokens, 1.0), gamma + 1.0)
        return roi.break_even_cost_ratio(gamma, roi.alpha_from_accepted(tau, gamma), slope)

    def point(o: GammaOption) -> float:
        v = c(o.gamma, o.expected_tokens.value)
        return v if math.isfinite(v) else -math.inf

    best = max(plan.options, key=point)
    e = best.expected_tokens
    return best.gamma, Estimate(c(best.gamma, e.value), c(best.gamma, e.lo), c(best.gamma, e.hi))
