"""Small statistics: bootstrap confidence intervals over prompts, stability, sample-size advice.

Prompts are the independent units (tokens within a prompt are correlated), so every interval
resamples prompts with replacement. Percentile intervals; a fixed seed makes them reproducible,
so `specbench report` regenerates identical numbers from the same records.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

DEFAULT_SEED = 20240101


@dataclass(frozen=True)
class Estimate:
    value: float
    lo: float
    hi: float

    @property
    def halfwidth(self) -> float:
        return (self.hi - self.lo) / 2

    def as_dict(self) -> dict[str, object]:
        return {"value": self.value, "ci95": [self.lo, self.hi]}


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _interval(samples: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2 * 100
    lo, hi = np.nanpercentile(samples, [tail, 100 - tail])
    return float(lo), float(hi)


def bootstrap(
    statistic: Callable[..., np.ndarray],
    arrays: list[np.ndarray],
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """Percentile bootstrap of `statistic` over units (rows shared by all arrays).

    `statistic(*arrays)` must accept arrays with a leading resample axis, shape (B, n), and return
    (B,); it is also called once on the original arrays with shape (1, n) for the point value.
    """
    n = len(arrays[0])
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan)
    value = float(statistic(*[a[None, :] for a in arrays])[0])
    if n == 1:
        return Estimate(value, math.nan, math.nan)
    idx = _rng(seed).integers(0, n, size=(n_boot, n))
    samples = statistic(*[a[idx] for a in arrays])
    lo, hi = _interval(samples, level)
    return Estimate(value, lo, hi)


def mean_ci(
    values: np.ndarray, n_boot: int = 2000, level: float = 0.95, seed: int = DEFAULT_SEED
) -> Estimate:
    """Mean of per-unit values with a bootstrap interval."""
    return bootstrap(lambda v: v.mean(axis=1), [np.asarray(values, float)], n_boot, level, seed)


def ratio_ci(
    numerator: np.ndarray,
    denominator: np.ndarray,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """Σ numerator / Σ denominator (e.g. accepted / proposed pooled over prompts), resampling prompts."""

    def stat(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        den_sum = den.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den_sum > 0, num.sum(axis=1) / den_sum, np.nan)

    return bootstrap(
        stat, [np.asarray(numerator, float), np.asarray(denominator, float)], n_boot, level, seed
    )


def ratio_of_means_ci(
    top: np.ndarray,
    bottom: np.ndarray,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """mean(top) / mean(bottom) with paired resampling (e.g. tokens/s of spec ÷ baseline per prompt)."""
    return ratio_ci(top, bottom, n_boot, level, seed)


def coefficient_of_variation(values: np.ndarray) -> float:
    v = np.asarray(values, float)
    if len(v) < 2 or v.mean() == 0:
        return math.nan
    return float(v.std(ddof=1) / abs(v.mean()))


def prompts_needed(n_now: int, halfwidth_now: float, target_halfwidth: float) -> int:
    """Prompts needed for a target CI half-width: half-width shrinks as 1/√n."""
    if not math.isfinite(halfwidth_now) or halfwidth_now <= target_halfwidth:
        return n_now
    return math.ceil(n_now * (halfwidth_now / target_halfwidth) ** 2)


def linear_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Least squares y ≈ a + b·x; returns (a, b, residuals). One distinct x gives b = 0."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(np.unique(x)) < 2:
        a = float(y.mean()) if len(y) else math.nan
        return a, 0.0, y - a
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b), y - (a + b * x)
