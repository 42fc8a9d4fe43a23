"""The one-sided normal-mixture boundary for sums of mean-zero terms (Robbins 1970; Howard,
Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence
sequences", Ann. Statist. 49; half-normal mixing over λ > 0), used by the canary's confidence
sequences over paired time windows (docs/theory.md §20):

    P(∃ n: Σ_u ζ_u / σ ≥ b_α(n)) ≤ α,     b_α(n) = u*·√(n + ρ),

where u* solves log 2 − ½ log((n + ρ)/ρ) + log Φ(u) + u²/2 = log(1/α). With σ estimated the
sequence is asymptotically valid (Waudby-Smith, Arnold, Wu, Ramdas et al. 2024); σ̂ is taken at
its one-sided upper confidence limit. (The adaptive plan used it until its verdict moved to the
group-sequential sign-flip design, docs/theory.md §14: a canary has hundreds of windows, where
the asymptotics hold; a cell has a handful of prompts, where they did not.)
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

VAR_DELTA = 0.1  # σ̂ is taken at its one-sided (1 − δ) upper confidence limit


@lru_cache(maxsize=4096)
def mixture_quantile(ratio: float, alpha: float) -> float:
    """u* of the one-sided half-normal mixture boundary at (n + ρ)/ρ = `ratio`: the root of
    log 2 − ½ log(ratio) + log Φ(u) + u²/2 = log(1/α) (module docstring)."""
    target = math.log(1.0 / alpha)

    def excess(u: float) -> float:
        return (
            math.log(2.0) - 0.5 * math.log(ratio) + float(special.log_ndtr(u)) + u * u / 2 - target
        )

    return float(optimize.brentq(excess, 0.0, 100.0, xtol=1e-10))


def mixture_rho(n_opt: float, alpha: float) -> float:
    """The mixing precision ρ (in units of σ²) that makes the boundary tightest near n_opt
    prompts (the approximation of Howard et al. 2021); any ρ fixed in advance is valid."""
    la = 2.0 * math.log(1.0 / alpha)
    return max(n_opt, 1.0) / (la + math.log(1.0 + la))


def boundary_factor(n: np.ndarray | int, alpha: float, rho: float) -> np.ndarray:
    """b_α(n)/n: multiply by σ to get the one-sided half-width of log S at n prompts."""
    ns = np.atleast_1d(np.asarray(n, float))
    out = np.full(ns.shape, np.inf)
    for i, k in enumerate(ns):
        if k >= 1:
            out[i] = mixture_quantile(float((k + rho) / rho), alpha) * math.sqrt(k + rho) / k
    return out


def sigma_upper(sd: np.ndarray, n: np.ndarray, delta: float = VAR_DELTA) -> np.ndarray:
    """σ̂ at its one-sided (1 − δ) upper confidence limit, √((n−1)/χ²_{n−1,δ})·σ̂ (∞ at n < 2)."""
    n = np.asarray(n, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        chi = sps.chi2.ppf(delta, np.maximum(n - 1, 1))
        factor = np.where(n >= 2, np.sqrt(np.maximum(n - 1, 1) / chi), np.inf)
    return np.asarray(sd, float) * factor
