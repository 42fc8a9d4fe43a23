"""Latency quantiles with distribution-free intervals, and SLO goodput
(docs/theory.md §16).

Quantile interval: the order-statistic (binomial) interval. For n iid latencies the count B
below the true p-quantile is Binomial(n, p), so [x_(l), x_(u)] with l the largest rank having
P(B < l) ≤ (1 − level)/2 and u the smallest with P(B ≥ u) ≤ (1 − level)/2 covers the p-quantile
with probability ≥ level for any continuous distribution (exact, not asymptotic; conservative
by the discreteness of B). An end that would need a rank below 1 or above n is null: with
n < 370 requests no upper bound on p99 exists at 95 % (0.99^n > 0.025). The point estimate is
numpy's linear-interpolation percentile, reported only with ≥ 1 / (1 − p) requests (as
`serving_cost`'s tails).

SLO goodput (vLLM benchmark_serving's `--goodput`): a request is *good* when it succeeded and meets
every objective set (value ≤ objective; TPOT of a one-token answer is 0); SLO goodput = good
requests ÷ the cell's duration, and the same for their output tokens. Intervals condition on the
duration: the share of good requests gets a Clopper–Pearson interval, the share of output tokens
from good requests a seeded percentile bootstrap over requests, each scaled by the cell's request
or token throughput.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from specbench.analysis.stats.resampling import DEFAULT_SEED
from specbench.analysis.stats.serialize import json_num


def quantile_ranks(n: int, p: float, level: float) -> tuple[int | None, int | None]:
    """The 1-based ranks (l, u) of the order-statistic interval for the p-quantile of n iid
    values; None where no rank in 1..n gives the bound."""
    if n <= 0:
        return None, None
    tail = (1.0 - level) / 2.0
    lo = int(sps.binom.ppf(tail, n, p))  # F(lo − 1) < tail: P(B ≥ lo) > 1 − tail
    hi = int(sps.binom.ppf(1.0 - tail, n, p)) + 1  # F(hi − 1) ≥ 1 − tail
    return (lo if lo >= 1 else None), (hi if hi <= n else None)


def quantile_ci(
    values: Sequence[float], p: float, level: float = 0.95
) -> tuple[float | None, float | None, float | None]:
    """(estimate, lo, hi) of the p-quantile (p in (0, 1)); estimate None below 1 / (1 − p)
    values, an end None where the sample cannot bound it."""
    x = np.sort(np.asarray([v for v in values if v is not None and math.isfinite(v)], float))
    n = len(x)
    if n == 0:
        return None, None, None
    enough = n >= max(2, math.ceil(1.0 / (1.0 - p) - 1e-9))
    est = float(np.percentile(x, 100.0 * p)) if enough else None
    lo_r, hi_r = quantile_ranks(n, p, level)
    lo = float(x[lo_r - 1]) if lo_r is not None else None
    hi = float(x[hi_r - 1]) if hi_r is not None else None
    return est, lo, hi


@dataclass(frozen=True)
class Slo:
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    @property
    def any(self) -> bool:
        return any(x is not None for x in (self.ttft_ms, self.tpot_ms, self.e2e_ms))

    def met(self, ttft_ms: float, tpot_ms: float | None, e2e_ms: float) -> bool:
        """Whether one successful request meets every objective set."""
        checks = (
            (self.ttft_ms, ttft_ms),
            (self.tpot_ms, tpot_ms if tpot_ms is not None else 0.0),  # one token: TPOT 0
            (self.e2e_ms, e2e_ms),
        )
        return all(slo is None or value <= slo for slo, value in checks)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    if n <= 0:
        return math.nan, math.nan
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


def token_share_ci(
    tokens: np.ndarray, good: np.ndarray, level: float, n_boot: int
) -> tuple[float, float]:
    """Percentile-bootstrap interval (requests resampled, seeded) of Σ tokens of good requests ÷
    Σ tokens."""
    rng = np.random.default_rng(DEFAULT_SEED)
    idx = rng.integers(0, len(tokens), size=(n_boot, len(tokens)))
    tot = tokens[idx].sum(axis=1)
    share = np.where(tot > 0, (tokens * good)[idx].sum(axis=1) / np.maximum(tot, 1e-300), 0.0)
    tail = (1.0 - level) / 2.0
    return float(np.quantile(share, tail)), float(np.quantile(share, 1.0 - tail))


def goodput(
    good: Sequence[bool],
    tokens: Sequence[int],
    requests_per_s: float | None,
    tokens_per_s: float | None,
    level: float = 0.95,
    n_boot: int = 2000,
) -> dict[str, object]:
    """SLO goodput of a cell from its requests' good flags (failed requests count, never good) and
    output tokens, and the cell's request and token throughput (per second of its duration)."""
    g = np.asarray(good, bool)
    t = np.asarray(tokens, float)
    n, k = len(g), int(g.sum())
    share = k / n if n else math.nan
    lo, hi = clopper_pearson(k, n, level)
    rps = requests_per_s if requests_per_s is not None else math.nan
    out: dict[str, object] = {
        "n": n,
        "good": k,
        "share": {"value": json_num(share), "ci95": [json_num(lo), json_num(hi)]},
        "requests_per_s": {
            "value": json_num(share * rps),
            "ci95": [json_num(lo * rps), json_num(hi * rps)],
        },
        "output_tokens_per_s": None,
    }
    tps = tokens_per_s if tokens_per_s is not None else math.nan
    total = float(t.sum())
    if total > 0 and math.isfinite(tps):
        tok_share = float((t * g).sum()) / total
        if 0.0 < tok_share < 1.0:
            t_lo, t_hi = token_share_ci(t, g, level, n_boot)
        else:  # all or none: no resample moves it; the request share's interval bounds it
            t_lo, t_hi = lo, hi
        out["output_tokens_per_s"] = {
            "value": json_num(tok_share * tps),
            "ci95": [json_num(t_lo * tps), json_num(t_hi * tps)],
        }
    return out
