"""Confidence sequences over paired time windows: bounds that hold at every look at once
(docs/theory.md §20).

A canary is looked at again and again (a cron job, `--watch`), so a fixed-n interval re-tested at
every look rejects a true null far more often than its nominal level (the simulation in
tests/unit/test_canary_sequences.py measures it). Each guard therefore reads a **confidence
sequence** over the windows seen so far; a window (both arms over the same minutes, so both see
the same load swings) is the unit.

Two kinds, one per shape of statistic:

- `mean_sequence`: any per-window statistic with a finite variance (a log ratio of medians, a
  difference of two shares). The two-sided normal-mixture boundary of Howard, Ramdas, McAuliffe &
  Sekhon (2021) with the plug-in σ̂, asymptotically valid (Waudby-Smith, Arnold, Wu, Ramdas et al.
  2024): the same boundary as `run --adaptive` (`analysis.stats.sequential`, §14), with σ̂ taken at its
  one-sided upper confidence limit so that a handful of windows does not make it overconfident.
- `betting_sequence`: a per-window value known to lie in [0, 1] (a share: acceptance
  accepted/proposed, the canary's share of the traffic). The hedged-capital betting sequence of
  Waudby-Smith & Ramdas (2024, "Estimating means of bounded random variables by betting",
  JRSS B 86), valid without any variance assumption: for every candidate mean m two wealth
  processes bet that the mean lies above / below m, and m is excluded once either wealth has
  reached 1/α_end (Ville's inequality). The running maximum of the wealth is used, so the
  sequence is the running intersection and never widens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specbench.analysis.stats.mixture_boundary import boundary_factor, mixture_rho, sigma_upper

# Waudby-Smith & Ramdas's truncation c: a bet against candidate mean m is at most c/m (upward)
# or c/(1 − m) (downward), so every wealth factor stays at or above 1 − c.
BET_CAP = 0.5
GRID_POINTS = 2001  # candidate means on [0, 1] for the betting sequence (resolution 5e-4)
_GRID_CHUNK = 256  # candidate means evaluated at once (memory: chunk × windows floats)
MORE_CAP = 1_000_000  # "about N more windows" is not estimated beyond this


@dataclass(frozen=True)
class Bounds:
    """A sequence after n windows: the point estimate, σ̂ of the per-window values and the
    always-valid two-sided interval (each end at level `side_alpha`)."""

    n: int
    estimate: float
    sd: float
    lower: float
    upper: float
    kind: str  # "mean" (normal mixture, plug-in σ̂) or "betting" (bounded values)


def _empty(kind: str, lo: float = -math.inf, hi: float = math.inf) -> Bounds:
    return Bounds(0, math.nan, math.nan, lo, hi, kind)


def mean_sequence(values: np.ndarray, side_alpha: float, n_opt: int, min_n: int) -> Bounds:
    """The normal-mixture sequence for the mean of `values` (one per window, in time order),
    tuned to be tightest near `n_opt` windows; infinite before `min_n` windows."""
    x = np.asarray(values, float)
    n = len(x)
    if n == 0:
        return _empty("mean")
    est = float(x.mean())
    sd = float(x.std(ddof=1)) if n >= 2 else math.nan
    if n < max(min_n, 2):
        return Bounds(n, est, sd, -math.inf, math.inf, "mean")
    rho = mixture_rho(n_opt, side_alpha)
    half = float(
        sigma_upper(np.asarray(sd), np.asarray(n)) * boundary_factor(n, side_alpha, rho)[0]
    )
    return Bounds(n, est, sd, est - half, est + half, "mean")


def _bets(x: np.ndarray, side_alpha: float) -> np.ndarray:
    """Predictable bets λ_i (Waudby-Smith & Ramdas's predictable plug-in): from the windows
    before i only, λ_i = √(2 log(1/α) / (σ̂²_{i−1} · i · log(1 + i))), truncated per candidate
    mean by the caller."""
    n = len(x)
    i = np.arange(1, n + 1, dtype=float)
    mu = (0.5 + np.cumsum(x)) / (i + 1)  # running mean after each window, shrunk to 1/2
    var_after = (0.25 + np.cumsum((x - mu) ** 2)) / (i + 1)
    var_before = np.concatenate(([0.25], var_after[:-1]))  # σ̂²_{i−1}, predictable
    return np.sqrt(2.0 * math.log(1.0 / side_alpha) / (var_before * i * np.log1p(i)))


def betting_sequence(values: np.ndarray, side_alpha: float, min_n: int) -> Bounds:
    """The betting sequence for the mean of `values` ∈ [0, 1] (one per window, in time order)."""
    x = np.clip(np.asarray(values, float), 0.0, 1.0)
    n = len(x)
    if n == 0:
        return _empty("betting", 0.0, 1.0)
    est = float(x.mean())
    sd = float(x.std(ddof=1)) if n >= 2 else math.nan
    if n < min_n:
        return Bounds(n, est, sd, 0.0, 1.0, "betting")
    lower, upper = betting_bounds(x, side_alpha)
    return Bounds(n, est, sd, float(lower[-1]), float(upper[-1]), "betting")


def betting_bounds(
    x: np.ndarray, side_alpha: float, grid_points: int = GRID_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the betting sequence after each window 1…n, rounded outwards to a grid
    of `grid_points` candidate means (so rounding never makes them narrower than exact)."""
    x = np.asarray(x, float)
    lam = _bets(x, side_alpha)
    grid = np.linspace(0.0, 1.0, grid_points)
    threshold = math.log(1.0 / side_alpha)
    n = len(x)
    # m is excluded below (above) once the "mean is above m" ("below m") wealth reached 1/α; the
    # excluded sets are a down-set (up-set) of m, so counting them gives the bound.
    below = np.zeros(n, int)
    above = np.zeros(n, int)
    for start in range(0, grid_points, _GRID_CHUNK):
        m = grid[start : start + _GRID_CHUNK, None]  # (G, 1)
        with np.errstate(divide="ignore"):
            lam_up = np.minimum(lam[None, :], BET_CAP / m)  # (G, n)
            lam_down = np.minimum(lam[None, :], BET_CAP / (1.0 - m))
        diff = x[None, :] - m  # (G, n)
        up = np.maximum.accumulate(np.cumsum(np.log1p(lam_up * diff), axis=1), axis=1)
        down = np.maximum.accumulate(np.cumsum(np.log1p(-lam_down * diff), axis=1), axis=1)
        below += (up >= threshold).sum(axis=0)
        above += (down >= threshold).sum(axis=0)
    # below[t] grid points 0…below−1 are excluded: the lower bound is the last of them
    lower = np.where(below > 0, grid[np.maximum(below - 1, 0)], 0.0)
    upper = np.where(above > 0, grid[np.minimum(grid_points - above, grid_points - 1)], 1.0)
    return lower, upper


def windows_to_settle(
    b: Bounds, line: float, side_alpha: float, n_opt: int, cap: int = MORE_CAP
) -> int | None:
    """About how many more windows until the sequence excludes `line`, with the estimate and σ̂
    held where they are (the normal-mixture half-width; the betting sequence's is close to it
    once σ̂ is stable). None when σ̂ is unknown or the estimate sits on the line."""
    if b.n < 2 or not math.isfinite(b.sd) or b.sd <= 0:
        return None
    gap = abs(b.estimate - line)
    if gap <= 0:
        return None
    rho = mixture_rho(n_opt, side_alpha)
    sd = float(sigma_upper(np.asarray(b.sd), np.asarray(b.n)))
    lo, hi = b.n, b.n
    while sd * float(boundary_factor(hi, side_alpha, rho)[0]) >= gap:
        if hi >= b.n + cap:
            return None
        lo, hi = hi, min(2 * hi + 1, b.n + cap)
    while hi - lo > 1:  # the half-width falls with n: bisect for the first n inside
        mid = (lo + hi) // 2
        if sd * float(boundary_factor(mid, side_alpha, rho)[0]) >= gap:
            lo = mid
        else:
            hi = mid
    return max(hi - b.n, 0)


def running_bounds(
    values: np.ndarray,
    kind: str,
    side_alpha: float,
    n_opt: int,
    min_n: int,
    grid_points: int = GRID_POINTS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, lower, upper) after each of the n values, for every look at once: the same
    sequences as `mean_sequence` / `betting_sequence` (the curves and the simulations)."""
    vals = np.asarray(values, float)
    m = len(vals)
    if m == 0:
        return np.empty(0), np.empty(0), np.empty(0)
    k = np.arange(1, m + 1, dtype=float)
    est = np.cumsum(vals) / k
    if kind == "betting":
        clipped = np.clip(vals, 0.0, 1.0)
        est = np.cumsum(clipped) / k
        lo, hi = betting_bounds(clipped, side_alpha, grid_points)
        early = k < min_n
        return est, np.where(early, 0.0, lo), np.where(early, 1.0, hi)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (np.cumsum(vals**2) - k * est**2) / (k - 1)
    sd = np.sqrt(np.maximum(var, 0.0))
    rho = mixture_rho(n_opt, side_alpha)
    half = sigma_upper(sd, k) * boundary_factor(k, side_alpha, rho)
    half = np.where(k >= max(min_n, 2), half, np.inf)
    return est, est - half, est + half
