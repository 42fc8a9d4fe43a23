"""Sign-flip tests of a ratio of sums, inverted into bounds: the three-outcome verdict's statistics.

A speedup, an acceptance rate and tokens per round are each a ratio of sums over prompts,
θ = Σ_u y_u / Σ_u x_u. At a value θ the per-prompt **pivot** d_u(θ) = y_u − θ·x_u has mean zero
exactly when θ is the truth (Fieller's trick), so "θ > θ0" is a question about the mean of n
independent pivots, answered by the studentized mean t(θ0) = mean(d) / (sd(d)/√n)
(docs/theory.md §8).

The reference distribution of t is not Student's: prompts carry very unequal weight (a heavy-tailed
cost, lengths across 30×), so t has heavy, skewed tails at the n people run. It comes from the data
instead: the pivots **centred at the estimate** (d_u(θ̂), mean exactly zero) with their signs
flipped in every one of the 2^n ways (Rademacher weights: a wild bootstrap of the studentized
mean, enumerated exactly up to MAX_EXACT prompts). Flipping the pivots at θ0 itself would be an
exact test *if* every prompt's pivot were symmetric about zero, but when acceptance is correlated
with length the heavy prompts are also the fast ones, the pivots are skewed, and that test's false
OFF rate reached 4 % at n = 8 in the calibration family; the centred flips hold both sides
(docs/theory.md §10).

Three consequences the verdict uses:

- **Resolution.** n prompts give 2^n equally likely flips, and a one-sided 2.5 % tail needs at
  least 40 of them: with fewer than ⌈log2(1/0.025)⌉ = 6 prompts nothing is decided — UNDECIDED by
  construction (`min_prompts`) and the printed bound is unbounded: the test's own resolution, not
  a tuned threshold.
- **Selection.** K candidates measured on the same prompts are flipped together (one sign per
  prompt) and the ON test uses the maximum of their studentized statistics (max-T): choosing the
  best of K and testing it is covered (Westfall & Young 1993).
- **Consistency.** Each printed bound is the test inverted with its critical value, so "lower
  bound > 1 + margin" and "ON" are the same statement.

Exact enumeration up to MAX_EXACT prompts; beyond, MC_FLIPS seeded random sign vectors plus the
identity.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize
from scipy import stats as sps

from specbench.analysis.stats.resampling import NAN_ESTIMATE, Estimate, cluster_sums

MAX_EXACT = 12  # enumerate all 2^n sign vectors up to this many prompts (4,096 rows)
MC_FLIPS = 4095  # random sign vectors beyond it (plus the identity: 4,096 rows)
FLIP_SEED = 20240101
POWER = 0.8  # the power the "needs N" advice and the minimum detectable effect are sized for
MORE_CAP = 10_000  # "needs about N prompts" is not estimated beyond this


def min_prompts(alpha_one_sided: float) -> int:
    """The fewest prompts at which a one-sided sign-flip test at `alpha_one_sided` can reject:
    the smallest n with 2^-n ≤ α (6 at 2.5 %)."""
    return max(1, math.ceil(math.log2(1.0 / alpha_one_sided) - 1e-12))


@lru_cache(maxsize=64)
def sign_vectors(n: int) -> np.ndarray:
    """(F, n) sign vectors, the identity first: all 2^n for n ≤ MAX_EXACT, else seeded draws."""
    if n <= MAX_EXACT:
        out = np.asarray(list(itertools.product((1.0, -1.0), repeat=n)), float).reshape(-1, n)
    else:
        rng = np.random.default_rng(FLIP_SEED + n)
        out = np.vstack([np.ones((1, n)), rng.choice((1.0, -1.0), size=(MC_FLIPS, n))])
    out.setflags(write=False)
    return out


def studentized(d: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """(F, K) studentized means of the sign-flipped pivots d (K, n): t = mean / (sd / √n).

    Σ d² is the same under every flip, so each flip costs one matrix product."""
    n = d.shape[-1]
    mean = signs @ d.T / n  # (F, K)
    sq = (d**2).sum(axis=-1)  # (K,)
    var = (sq[None, :] - n * mean**2) / max(n - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / np.sqrt(np.maximum(var, 0.0) / n)
        # zero spread: the pivots are all equal; their sign alone says which way (±inf)
        edge = np.where(mean == 0.0, 0.0, np.sign(mean) * np.inf)
    return np.where(var <= 0.0, edge, t)


def _upper_critical(stat: np.ndarray, alpha: float) -> float:
    """The smallest c with P*(stat ≥ c) ≤ α over the flips (∞ when no value is that rare).

    Ties count against rejection; with random flips p = (1 + #) / (1 + F) (the identity is row 0
    and counts itself, so the count already includes it: p = # / F either way)."""
    s = np.sort(stat[~np.isnan(stat)])[::-1]  # descending
    if len(s) == 0:
        return math.inf
    counts = np.searchsorted(-s, -s, side="right")  # #{stat ≥ s[i]}
    ok = counts / len(s) <= alpha + 1e-12
    if not ok[0]:
        return math.inf
    return float(s[int(np.nonzero(ok)[0][-1])])


@dataclass(frozen=True)
class RatioPivots:
    """K ratios of sums sharing n prompts: θ_k = Σ_u y_ku / Σ_u x_ku (y, x: (K, n))."""

    y: np.ndarray
    x: np.ndarray

    @property
    def n(self) -> int:
        return int(self.y.shape[-1])

    @property
    def estimates(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.y.sum(axis=-1) / self.x.sum(axis=-1)

    def pivots(self, theta: np.ndarray | float) -> np.ndarray:
        return self.y - np.reshape(theta, (-1, 1)) * self.x

    def t_at(self, k: int, theta: float) -> float:
        d = self.y[k] - theta * self.x[k]
        sd = float(d.std(ddof=1)) if self.n > 1 else math.nan
        m = float(d.mean())
        if not sd > 0:
            return math.copysign(math.inf, m) if m else 0.0
        return m / (sd / math.sqrt(self.n))

    def n_eff(self) -> float:
        """Kish's effective number of prompts of the ratio's weights x (of the first ratio)."""
        w = np.abs(self.x[0])
        return float(w.sum() ** 2 / (w**2).sum()) if w.sum() > 0 else 0.0


def throughput_pivots(
    tok_new: np.ndarray, ms_new: np.ndarray, tok_base: np.ndarray, ms_base: np.ndarray
) -> RatioPivots:
    """The speedup as a ratio of sums: per prompt, its tokens w_u = (tok_new + tok_base)/2 times
    the baseline's per-token time (y) and the setting's (x); Σ y / Σ x is the pooled decode-time
    ratio on the same tokens (docs/theory.md §8) — exactly the pooled throughput ratio when both
    sides decode the same tokens (greedy), and its token-weighted form when sampled lengths differ.
    Arrays (K, n) or (n,)."""
    tn, mn = np.atleast_2d(tok_new), np.atleast_2d(ms_new)
    tb, mb = np.atleast_2d(tok_base), np.atleast_2d(ms_base)
    w = (tn + tb) / 2.0
    return RatioPivots(w * mb / tb, w * mn / tn)


@dataclass(frozen=True)
class Decision:
    """The three-outcome test at θ0 of K ratios (docs/theory.md §8)."""

    outcome: str  # "on" | "off" | "undecided"
    chosen: int | None  # ON: the candidate with the highest estimate among those that clear
    lower: np.ndarray  # (K,) simultaneous lower bounds (NaN: unbounded below)
    upper: np.ndarray  # (K,) upper bounds, each at the one-sided level (NaN: unbounded above)
    critical_on: float  # max-T critical value of the ON test (inf: cannot reject at this n)
    n: int
    n_eff: float


def _invert(piv: RatioPivots, k: int, crit: float, above: bool) -> float:
    """The θ at which candidate k's studentized statistic equals `crit` (t falls as θ rises):
    the lower bound (crit > 0) or the upper bound (crit < 0); NaN when unbounded."""
    if not math.isfinite(crit):
        return math.nan
    est = float(piv.estimates[k])
    if not (math.isfinite(est) and est > 0):
        return math.nan

    # t(θ) from five moments (the pivots are linear in θ): the root search then costs
    # arithmetic, not an array pass per step; centred moments keep the spread accurate
    y, x, n = piv.y[k], piv.x[k], piv.n
    my, mx = float(y.mean()), float(x.mean())
    dy, dx = y - my, x - mx
    syy, sxy, sxx = (float(v) / max(n - 1, 1) for v in (dy @ dy, dy @ dx, dx @ dx))

    def f(log_theta: float) -> float:
        theta = math.exp(log_theta)
        m = my - theta * mx
        var = syy - 2.0 * theta * sxy + theta * theta * sxx
        if not var > 0:
            return (math.copysign(math.inf, m) if m else 0.0) - crit
        return m / math.sqrt(var / n) - crit

    lo, hi = math.log(est) - 12.0, math.log(est) + 12.0
    a, b = (lo, math.log(est)) if above else (math.log(est), hi)
    try:
        fa, fb = f(a), f(b)
    except (OverflowError, ValueError):
        return math.nan
    if not (math.isfinite(fa) and math.isfinite(fb)) or fa * fb > 0:
        # |t| never reaches crit on this side (e.g. pivots all one sign): no finite bound
        return math.nan
    return math.exp(optimize.brentq(f, a, b, xtol=1e-10))


invert = _invert  # public: `stats.block_t` inverts its t tests the same way


def decide(piv: RatioPivots, theta0: float, alpha: float) -> Decision:
    """ON / OFF / UNDECIDED for K candidates at θ0, each side a one-sided test at `alpha`.

    ON: max-T sign-flip test of "every θ_k ≤ θ0" (joint flips: selection covered); the chosen
    candidate is the highest estimate among those whose own statistic clears the max-T critical
    value. OFF: every candidate's own test of "θ_k ≥ θ0" rejects (an intersection-union test,
    which needs no multiplicity correction). Bounds: each test inverted with its critical value at
    θ0, so ON ⇔ some lower bound > θ0 and OFF ⇔ every upper bound < θ0."""
    k_count, n = piv.y.shape
    est = piv.estimates
    nan = np.full(k_count, math.nan)
    if n < min_prompts(alpha):
        return Decision("undecided", None, nan, nan, math.inf, n, piv.n_eff())
    t_obs, crit_on, crit_off = _tests(piv, theta0, alpha)
    lower = np.asarray([_bound(piv, k, theta0, crit_on, True) for k in range(k_count)])
    upper = np.asarray([_bound(piv, k, theta0, crit_off[k], False) for k in range(k_count)])
    state = _outcome(t_obs, crit_on, crit_off)
    chosen = None
    if state == "on":
        chosen = max((k for k in range(k_count) if t_obs[k] >= crit_on), key=lambda k: est[k])
    return Decision(state, chosen, lower, upper, crit_on, n, piv.n_eff())


def _tests(piv: RatioPivots, theta0: float, alpha: float) -> tuple[np.ndarray, float, np.ndarray]:
    """The observed statistics at θ0 and the critical values of the ON (max-T) and OFF tests."""
    k_count, n = piv.y.shape
    signs = sign_vectors(n)
    t_obs = studentized(piv.pivots(np.full(k_count, theta0)), signs[:1])[0]
    # the reference distribution: sign flips of each candidate's pivots centred at its own
    # estimate (module docstring: flips at θ0 assume symmetric pivots, which real traffic breaks)
    t_star = studentized(piv.pivots(piv.estimates), signs)
    crit_on = _upper_critical(np.max(t_star, axis=1), alpha)
    crit_off = np.asarray([-_upper_critical(-t_star[:, k], alpha) for k in range(k_count)])
    return t_obs, crit_on, crit_off


def _outcome(t_obs: np.ndarray, crit_on: float, crit_off: np.ndarray) -> str:
    if np.any(t_obs >= crit_on):
        return "on"
    if np.all(t_obs <= crit_off):
        return "off"
    return "undecided"


def outcome(piv: RatioPivots, theta0: float, alpha: float) -> str:
    """`decide`'s outcome alone (no bounds: for simulations that only count outcomes)."""
    if piv.n < min_prompts(alpha):
        return "undecided"
    return _outcome(*_tests(piv, theta0, alpha))


def _bound(piv: RatioPivots, k: int, theta0: float, crit: float, lower: bool) -> float:
    """A bound that agrees with the test at θ0 by construction: the inversion is searched on the
    side of θ0 the test decided (t is not monotone in θ for every sample)."""
    b = _invert(piv, k, crit, lower)
    if math.isnan(b):
        return b
    t0 = piv.t_at(k, theta0)
    rejects = t0 >= crit if lower else t0 <= crit
    if lower:
        return max(b, theta0 * (1 + 1e-12)) if rejects else min(b, theta0)
    return min(b, theta0 * (1 - 1e-12)) if rejects else max(b, theta0)


def interval(piv: RatioPivots, level: float) -> tuple[float, float]:
    """The marginal `level` interval of θ_0 (the first ratio): each end the one-sided sign-flip
    test at (1 − level)/2 inverted (critical values at the estimate). NaN ends: unbounded."""
    one = RatioPivots(piv.y[:1], piv.x[:1])
    alpha = (1.0 - level) / 2.0
    if one.n < min_prompts(alpha):
        return math.nan, math.nan
    est = float(one.estimates[0])
    centred = one.pivots(np.asarray([est]))
    if np.allclose(centred, 0.0, atol=1e-12 * max(float(np.abs(one.y).max()), 1e-300)):
        return est, est  # every prompt has exactly the same ratio: nothing to be uncertain about
    t_star = studentized(centred, sign_vectors(one.n))[:, 0]
    crit = _upper_critical(t_star, alpha)
    crit_low = -_upper_critical(-t_star, alpha)
    return _invert(one, 0, crit, True), _invert(one, 0, crit_low, False)


# --------------------------------------------------------------------------------------------
# power: the minimum detectable effect and the prompts a verdict would need


def se_log(piv: RatioPivots, k: int, theta: float) -> float:
    """Standard error of log θ̂_k from the pivots at θ (delta method): sd(d) / (√n · θ · mean x)."""
    d = piv.y[k] - theta * piv.x[k]
    n = piv.n
    if n < 2:
        return math.nan
    mx = float(piv.x[k].mean())
    return float(d.std(ddof=1)) / (math.sqrt(n) * theta * mx) if mx > 0 else math.nan


def detectable_ratio(se: float, n: int, alpha: float, k: int = 1) -> float:
    """The factor by which the truth must exceed θ0 for P(ON) ≈ POWER at n prompts: exp((t_c +
    z_power)·se), t_c the one-sided Student-t critical value at α/K (a normal-theory stand-in for
    the max-T sign-flip critical value). inf below the test's resolution or without an se."""
    if n < min_prompts(alpha) or not (math.isfinite(se) and se > 0):
        return math.inf
    tc = float(sps.t.ppf(1.0 - alpha / max(k, 1), n - 1))
    z = float(sps.norm.ppf(POWER))
    with np.errstate(over="ignore"):
        return float(np.exp((tc + z) * se))


def prompts_for_power(
    effect_log: float, sd_log: float, alpha: float, k: int = 1, cap: int = MORE_CAP
) -> int | None:
    """The prompts at which a true |log θ − log θ0| = effect_log is decided with POWER, given the
    per-prompt sd of log θ̂ (se·√n): the smallest n ≥ min_prompts with (t_c(n) + z)·sd/√n ≤ effect.
    None when beyond `cap` (or no effect): the data cannot settle it within any sane budget."""
    if not (math.isfinite(effect_log) and effect_log > 0 and math.isfinite(sd_log) and sd_log > 0):
        return None
    z = float(sps.norm.ppf(POWER))

    def short(n: int) -> bool:
        tc = float(sps.t.ppf(1.0 - alpha / max(k, 1), n - 1))
        return (tc + z) * sd_log / math.sqrt(n) <= effect_log

    lo = min_prompts(alpha)
    if short(lo):
        return lo
    if not short(cap):
        return None
    hi = cap
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if short(mid) else (mid, hi)
    return hi


# --------------------------------------------------------------------------------------------
# the printed interval of any ratio of sums (α, τ): the same test inverted, prompts as units


def ratio_estimate(
    numerator: np.ndarray,
    denominator: np.ndarray,
    level: float = 0.95,
    clusters: Sequence[object] | None = None,
    limits: tuple[float, float] | None = None,
) -> Estimate:
    """Σ numerator / Σ denominator over prompts (repeats of a prompt summed into one unit) with
    `interval`'s sign-flip interval: an acceptance rate Σ accepted / Σ drafted, tokens per round
    Σ accepted / Σ rounds (docs/theory.md §7). Below the test's resolution, or where the test
    cannot bound a side, the end is unbounded (NaN) — or, with `limits` (a rate: (0, 1)), the
    quantity's own range, and finite ends are clipped to it. A unit with nothing in either sum
    (a prompt that drafted nothing) carries no information and is not counted."""
    y, x = cluster_sums([numerator, denominator], clusters)
    keep = (x != 0) | (y != 0)
    y, x = y[keep], x[keep]
    if len(x) == 0 or not x.sum() > 0:
        return NAN_ESTIMATE
    value = float(y.sum() / x.sum())
    lo, hi = interval(RatioPivots(y[None, :], x[None, :]), level)
    if limits is not None:
        # a rate of exactly 0 or 1 has pivots that vanish at the estimate: the test has no
        # spread to bound it with (`interval` would call it exact), so its far end is the range's
        if value <= limits[0] or value >= limits[1]:
            lo, hi = math.nan, math.nan
        lo = limits[0] if math.isnan(lo) else min(max(lo, limits[0]), limits[1])
        hi = limits[1] if math.isnan(hi) else min(max(hi, limits[0]), limits[1])
    elif value == 0.0:
        lo, hi = 0.0, math.nan  # nothing in the numerator anywhere: no spread, no upper end
    return Estimate(value, lo, hi)


def rate_estimate(
    numerator: np.ndarray,
    denominator: np.ndarray,
    level: float = 0.95,
    clusters: Sequence[object] | None = None,
) -> Estimate:
    """`ratio_estimate` of a rate in [0, 1] (numerator ≤ denominator per unit: α, acceptance)."""
    return ratio_estimate(numerator, denominator, level, clusters, limits=(0.0, 1.0))
