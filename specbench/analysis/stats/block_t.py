"""The three-outcome rule of §8 when the units are few *blocks* (repeats of a whole run) rather
than many prompts: a studentized mean of the blocks' pivots against Student's t with B − 1
degrees of freedom, the max over K candidates from the multivariate t with their estimated
correlation (docs/theory.md §22).

Why not the sign flips of `signflip`: at B blocks they have 2^B rows and cannot reject below 6
blocks; and a block is a sum over a whole steady-state run (hundreds of requests), so its pivot is
close to normal where a prompt's is not — the reason the flips exist. Why not smaller units (time
windows inside a run): every window of a run shares the run's engine start, which moves its speed
by several percent (§15), so windows are correlated within a block and treating them as
independent gave a false ON rate of 4.6 % ± 0.7 (nominal 2.5 %) on the seeded server of
`analysis.calibration.serving_queue`.

The max-T critical value is the (1 − α) quantile of max_k Z_k / √(W/ν), Z ~ N(0, R), W ~ χ²_ν,
R the correlation of the candidates' pivots at their estimates (Hothorn, Bretz & Westfall 2008;
as `stats.crossed` does for engine starts), from seeded draws.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from specbench.analysis.stats.signflip import Decision, RatioPivots, invert

DRAWS = 20_000
SEED = 20261202


def _correlation(d: np.ndarray) -> np.ndarray:
    """The correlation of the rows of d, positive semi-definite (negative eigenvalues clipped);
    a row with no spread is uncorrelated with the others."""
    k = d.shape[0]
    if k == 1:
        return np.ones((1, 1))
    cov = np.cov(d)
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    safe = np.where(sd > 0, sd, 1.0)
    corr = cov / np.outer(safe, safe)
    corr[sd == 0, :] = 0.0
    corr[:, sd == 0] = 0.0
    np.fill_diagonal(corr, 1.0)
    w, v = np.linalg.eigh((corr + corr.T) / 2)
    corr = (v * np.maximum(w, 0.0)) @ v.T
    s = np.sqrt(np.maximum(np.diag(corr), 1e-300))
    return np.asarray(corr / np.outer(s, s))


def max_t_critical(d: np.ndarray, alpha: float, df: int) -> float:
    """(1 − alpha) quantile of the max of K correlated Student-t(df) statistics."""
    rng = np.random.default_rng(SEED)
    z = rng.multivariate_normal(np.zeros(d.shape[0]), _correlation(d), size=DRAWS)
    t = z / np.sqrt(rng.chisquare(df, size=(DRAWS, 1)) / df)
    return float(np.quantile(t.max(axis=1), 1.0 - alpha))


def decide(piv: RatioPivots, theta0: float, alpha: float) -> Decision:
    """ON / OFF / UNDECIDED for K ratios over B blocks at θ0 (each side one-sided at alpha): ON
    when some candidate's t at θ0 reaches the max-T critical value (the highest estimate among
    those is chosen), OFF when every candidate's own t is at or below −t_{B−1}(1 − alpha);
    bounds are the tests inverted, so ON ⇔ some lower bound > θ0, OFF ⇔ every upper < θ0."""
    k_count, n = piv.y.shape
    nan = np.full(k_count, math.nan)
    if n < 2:
        return Decision("undecided", None, nan, nan, math.inf, n, piv.n_eff())
    df = n - 1
    est = piv.estimates
    crit_on = max_t_critical(piv.pivots(est), alpha, df)
    crit_off = -float(sps.t.ppf(1.0 - alpha, df))
    t_obs = np.asarray([piv.t_at(k, theta0) for k in range(k_count)])
    lower = np.asarray([invert(piv, k, crit_on, True) for k in range(k_count)])
    upper = np.asarray([invert(piv, k, crit_off, False) for k in range(k_count)])
    if np.any(t_obs >= crit_on):
        chosen = max((k for k in range(k_count) if t_obs[k] >= crit_on), key=lambda k: est[k])
        return Decision("on", chosen, lower, upper, crit_on, n, piv.n_eff())
    state = "off" if np.all(t_obs <= crit_off) else "undecided"
    return Decision(state, None, lower, upper, crit_on, n, piv.n_eff())


def interval(piv: RatioPivots, k: int, level: float) -> tuple[float, float]:
    """Candidate k's marginal `level` interval: the t test at (1 − level)/2 inverted both ways."""
    if piv.n < 2:
        return math.nan, math.nan
    crit = float(sps.t.ppf(1.0 - (1.0 - level) / 2.0, piv.n - 1))
    return invert(piv, k, crit, True), invert(piv, k, -crit, False)


def blocks_for_power(
    piv: RatioPivots, k: int, theta0: float, alpha: float, power: float = 0.8, cap: int = 1000
) -> int | None:
    """The blocks at which candidate k's measured gain would be decided with `power`: the
    smallest B ≥ 2 with (t_{B−1}(1 − alpha/K) + z_power) · sd/√B ≤ |log θ̂ − log θ0|, sd the
    per-block sd of log θ̂ (delta method). None beyond `cap` or with no effect."""
    est = float(piv.estimates[k])
    if not (est > 0 and piv.n >= 2):
        return None
    d = piv.y[k] - theta0 * piv.x[k]
    mx = float(piv.x[k].mean())
    sd = float(d.std(ddof=1)) / (theta0 * mx) if mx > 0 else math.nan
    effect = abs(math.log(est / theta0))
    if not (effect > 0 and math.isfinite(sd) and sd > 0):
        return None
    z = float(sps.norm.ppf(power))
    kk = piv.y.shape[0]
    for b in range(2, cap + 1):
        if (float(sps.t.ppf(1.0 - alpha / kk, b - 1)) + z) * sd / math.sqrt(b) <= effect:
            return b
    return None
