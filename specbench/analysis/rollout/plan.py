"""The rollout plan of one bucket × setting: ā(γ) and the speedup it implies for γ = 1..γ_max,
the point-optimal γ, and the ON/OFF verdict (docs/theory.md §3–4, §8). Pure numpy.

Speedup model (the one in `analysis.arithmetic.roi`), per request r with α_r and L_r scored tokens, pooled
by tokens because a deployment spends L_r / ā(γ, α_r) rounds on request r:
    ā_pool(γ) = Σ L_r / Σ (L_r / ā(γ, α_r)),   ā(γ, α) = (1 − α^{γ+1}) / (1 − α),
    round(γ) = γ·T_d + verify_base + slope·γ,    speedup(γ) = T_ar · ā_pool(γ) / round(γ).
(ā at the pooled α instead is optimistic whenever α varies across requests: ā is concave in α.)
Timings are taken as exact; speedup(γ) is then a ratio of sums over requests (Σ L_r·T_ar /
round(γ) over Σ L_r / ā(γ, α_r)), decided like `run`'s verdict (docs/theory.md §8): the
sign-flip max-T test over γ = 1..γ_max, three outcomes — ON when some γ's lower bound exceeds
1 + margin, OFF when every γ's upper bound is below it, UNDECIDED otherwise (with the requests a
decision would likely need) — each with its minimum detectable speedup at 80 % power.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specbench.analysis.arithmetic import roi
from specbench.analysis.rollout.timing import TimeModel
from specbench.analysis.stats import signflip
from specbench.analysis.stats.resampling import DEFAULT_SEED, Estimate
from specbench.analysis.stats.signflip import RatioPivots

MAX_DETECTABLE = 11.0  # a detectable speedup above 11× (+1000 %) is reported as unbounded


def predicted_speedup(gamma: int, alpha: float, tm: TimeModel) -> float:
    """T_ar / ITL_eff(γ) under iid acceptance α; γ = 0 is 1."""
    return tm.timing.speedup_iid(gamma, alpha)


def break_even_alpha(gamma: int, tm: TimeModel) -> float | None:
    """α at which speedup(γ) = 1: ā(γ, α) = round(γ) / T_ar; None when no α reaches it."""
    return roi.break_even_at_cost(gamma, tm.timing.round_ms(gamma) / tm.t_target_ms)


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
    verdict: str  # "on" | "off" | "undecided"
    gamma: int  # γ to deploy; 0 = off
    best_gamma: int  # the speedup-maximising γ (0 when none beats plain decoding)
    speedup: Estimate  # at best_gamma (1 when it is 0)
    itl_baseline_ms: float
    itl_ms: Estimate  # at best_gamma
    break_even_alpha: float | None  # at best_gamma (or at γ = 1 when it is 0)
    reason: str
    options: list[GammaOption]
    warnings: list[str] = field(default_factory=list)
    detectable_speedup: float | None = None  # at 80 % power (None: unbounded)
    requests_needed: int | None = None  # undecided: requests that would likely settle it


def _pooled_options(
    alphas: np.ndarray,
    tokens: np.ndarray,
    tm: TimeModel,
    gamma_max: int,
    level: float,
) -> tuple[list[GammaOption], RatioPivots]:
    """Per γ: ā_pool(γ) = Σ L_r / Σ (L_r / ā(γ, α_r)) with its interval, and the speedup and ITL
    it implies; and the speedups' pivots for the decision (one ratio of sums per γ)."""
    a = np.clip(alphas, 0.0, 1.0)
    rounds = np.stack(
        [
            tokens / np.asarray([roi.expected_tokens(g, float(x)) for x in a])
            for g in range(1, gamma_max + 1)
        ]
    )  # (γ_max, R): rounds each request takes at γ
    per_token = np.asarray(
        [tm.t_target_ms / tm.timing.round_ms(g) for g in range(1, gamma_max + 1)]
    )
    options = []
    for g in range(1, gamma_max + 1):
        lo, hi = signflip.interval(RatioPivots(tokens[None, :], rounds[g - 1 : g]), level)
        value = float(tokens.sum() / rounds[g - 1].sum())
        expected = Estimate(value, lo, hi)
        speed = Estimate(*(x * per_token[g - 1] for x in (value, lo, hi)))
        itl = Estimate(
            *(tm.t_target_ms / x if x > 0 else math.nan for x in (speed.value, speed.hi, speed.lo))
        )
        options.append(GammaOption(g, expected, speed, itl))
    piv = RatioPivots(np.broadcast_to(tokens, rounds.shape) * per_token[:, None], rounds)
    return options, piv


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
    del n_boot, seed  # the sign-flip test needs no resamples
    piv: RatioPivots | None = None
    if per_request is not None and len(per_request[0]) >= 2:
        options, piv = _pooled_options(
            np.asarray(per_request[0], float),
            np.asarray(per_request[1], float),
            tm,
            gamma_max,
            level,
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
        # OFF only when shown (every γ's upper bound below the line); else UNDECIDED (§8)
        line = 1.0 + margin
        if piv is not None:
            shown = signflip.decide(piv, line, (1.0 - level) / 2.0).outcome == "off"
        else:
            highs = [o.speedup.hi for o in options]
            shown = all(math.isfinite(h) and h < line for h in highs)
        if not shown:
            reason = f"undecided, speculation stays off: {reason}, but not shown below {line:g}"
        return RolloutPlan(
            "off" if shown else "undecided",
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
    if piv is not None:
        return _decide_pooled(piv, options, top, tm, gamma_max, margin, level, warnings)
    lo = top.speedup.lo
    hi = max((o.speedup.hi for o in options), default=math.nan)
    if math.isfinite(lo) and lo > 1.0 + margin:
        verdict, gamma = "on", top.gamma
        reason = f"speedup CI low end {lo:.3f} > 1 + margin {margin:g}"
    elif math.isfinite(hi) and hi < 1.0 + margin:
        verdict, gamma = "off", 0
        reason = f"shown not to pay: every γ's CI high end is below 1 + margin {margin:g}"
    else:
        verdict, gamma = "undecided", 0
        reason = (
            f"undecided, speculation stays off: γ={top.gamma} predicts "
            f"{top.speedup.value:.2f}× and its CI contains 1 + margin {margin:g}"
            if math.isfinite(lo)
            else f"undecided: γ={top.gamma} predicts {top.speedup.value:.2f}× but one request "
            "gives no confidence interval"
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


def _decide_pooled(
    piv: RatioPivots,
    options: list[GammaOption],
    top: GammaOption,
    tm: TimeModel,
    gamma_max: int,
    margin: float,
    level: float,
    warnings: list[str],
) -> RolloutPlan:
    """The three-outcome sign-flip verdict over γ = 1..γ_max on per-request pivots (§8)."""
    alpha = (1.0 - level) / 2.0
    line = 1.0 + margin
    d = signflip.decide(piv, line, alpha)
    k = d.chosen if d.chosen is not None else top.gamma - 1
    se = signflip.se_log(piv, k, line)
    ratio = signflip.detectable_ratio(se, d.n, alpha, gamma_max)
    detectable = line * ratio if ratio <= MAX_DETECTABLE else None
    need = None
    chosen = top
    if d.outcome == "on" and d.chosen is not None:
        chosen = options[d.chosen]
        verdict, gamma = "on", chosen.gamma
        reason = (
            f"simultaneous lower bound {d.lower[d.chosen]:.3f} over γ = 1..{gamma_max} > "
            f"1 + margin {margin:g} ({d.n} requests, effective {d.n_eff:.1f})"
        )
    elif d.outcome == "off":
        verdict, gamma = "off", 0
        reason = (
            f"shown not to pay: every γ's upper bound is below 1 + margin {margin:g} (γ={top.gamma} "
            f"predicts {top.speedup.value:.2f}×, upper bound {d.upper[top.gamma - 1]:.3f})"
        )
    else:
        verdict, gamma = "undecided", 0
        est = float(piv.estimates[k])
        effect = abs(math.log(est / line)) if est > 0 else math.nan
        need = signflip.prompts_for_power(effect, se * math.sqrt(d.n), alpha, gamma_max)
        advice = (
            f"needs about {need} requests for 80 % power"
            if need is not None
            else f"not settled within {signflip.MORE_CAP:,} requests at this effect"
        )
        reason = (
            f"undecided, speculation stays off: γ={top.gamma} predicts "
            f"{top.speedup.value:.2f}× and its bounds contain 1 + margin {margin:g} "
            f"({d.n} requests); {advice}"
        )
    return RolloutPlan(
        verdict,
        gamma,
        chosen.gamma,
        chosen.speedup,
        tm.t_target_ms,
        chosen.itl_ms,
        break_even_alpha(chosen.gamma, tm),
        reason,
        options,
        warnings,
        None if detectable is None else float(detectable),
        need,
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
