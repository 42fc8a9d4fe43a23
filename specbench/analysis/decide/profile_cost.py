"""Cost per 10⁶ good output tokens at the deployment profile (docs/theory.md §22, "Cost at the
profile"): the server's price over its good-token rate, with the interval of a ratio of sums over
blocks (`analysis.stats.block_t`) — the block t interval of the mean rate turned over."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specbench.analysis.stats import block_t
from specbench.analysis.stats.signflip import RatioPivots


@dataclass(frozen=True)
class ServerPrice:
    """What one server costs: $ per GPU-hour and its GPUs (the profile's price)."""

    gpu_hour_usd: float
    gpus: int

    def usd_per_s(self) -> float:
        return self.gpu_hour_usd * self.gpus / 3600.0


@dataclass(frozen=True)
class Cost:
    """$ per 10⁶ good output tokens at the profile and its `level` interval (NaN: none)."""

    usd_per_mtok: float
    ci95: tuple[float, float]


def cost_per_mtok(price: ServerPrice, good_tokens_per_s: float) -> float:
    """price × GPUs / (good tokens/s × 3600) × 10⁶ (inf where no token was good)."""
    if not good_tokens_per_s > 0:
        return math.inf
    return price.usd_per_s() / good_tokens_per_s * 1e6


def block_cost(price: ServerPrice, rates: np.ndarray, level: float) -> Cost:
    """The cost at the blocks' mean good-token rate `rates` (B,), with its interval (module
    docstring): Σ_b c / Σ_b r_b, c the server's $ per s × 10⁶."""
    c = price.usd_per_s() * 1e6
    piv = RatioPivots(np.full((1, rates.size), c), np.atleast_2d(rates).astype(float))
    value = cost_per_mtok(price, float(rates.mean())) if rates.size else math.nan
    lo, hi = block_t.interval(piv, 0, level) if rates.sum() > 0 else (math.nan, math.nan)
    return Cost(value, (lo, hi))
