"""Did the server keep up? Queueing growth across a steady-state window (docs/theory.md §21).

A server that sustains the offered rate has a stationary queue: each request's latency from its
arrival (client wait + TTFT) fluctuates around a level. One that does not has a queue that grows
with time, and so does that latency. The rule: over the requests that arrived in the window,
regress that latency on the arrival time; flag *queueing growth* when Kendall's τ is positive
at one-sided level ALPHA **and** the Theil–Sen line rises across the window by more than
GROWTH_FACTOR (3) × the median latency of the window's first quarter (the latency at least
quadrupled).
The test alone is not enough: waits in a stationary queue are autocorrelated, so τ's p-value
(which assumes independent pairs) is too small under load; the effect-size gate keeps the false
alarm rate at the level tests/unit/test_steady_state.py measures by simulation (§21).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

ALPHA = 0.01  # one-sided level of the trend test
GROWTH_FACTOR = 3.0  # rise across the window, in units of the first quarter's median latency
MIN_REQUESTS = 8  # fewer: no verdict (None)
# "kept up" is claimed from this many requests in the window: the size its power was measured
# at (docs/theory.md §21: 76 % at ρ = 1.25 with 200); below it only growth is reported, and
# its absence is "can't tell", not "kept up" — a window too short to see a queue grow
KEPT_UP_MIN_REQUESTS = 200


@dataclass(frozen=True)
class Growth:
    """The trend of latency over arrival time across a window."""

    n: int
    tau: float
    p_value: float
    slope_ms_per_s: float  # Theil–Sen
    rise_ms: float  # slope × window length
    baseline_ms: float  # median latency of the window's first quarter
    growing: bool


def queueing_growth(
    arrival_s: Sequence[float], latency_ms: Sequence[float], start: float, end: float
) -> Growth | None:
    """The module's rule over the requests arriving in [start, end] (None: fewer than
    MIN_REQUESTS, or a window of no length)."""
    t = np.asarray(arrival_s, dtype=float)
    y = np.asarray(latency_ms, dtype=float)
    if len(t) < MIN_REQUESTS or end <= start or np.ptp(t) <= 0:
        return None
    tau, p = sps.kendalltau(t, y, alternative="greater")
    tau = 0.0 if np.isnan(tau) else float(tau)  # constant latencies: no trend
    p = 1.0 if np.isnan(p) else float(p)
    slope = float(sps.theilslopes(y, t).slope)
    first = y[t <= start + (end - start) / 4.0]
    baseline = float(np.median(first if len(first) else y))
    rise = slope * (end - start)
    growing = p < ALPHA and rise > GROWTH_FACTOR * baseline
    return Growth(len(t), tau, p, slope, rise, baseline, growing)


def kept_up(growth: Growth | None, hit_bound: bool) -> bool | None:
    """False: the queue grew (or the batch hit its time bound); True: it did not, over a window
    of at least KEPT_UP_MIN_REQUESTS requests; None: can't tell (too few requests)."""
    if hit_bound or (growth is not None and growth.growing):
        return False
    if growth is None or growth.n < KEPT_UP_MIN_REQUESTS:
        return None
    return True
