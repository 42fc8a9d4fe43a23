"""Seeded simulation of the pool schedule's false-ON rate and power (`analysis.decide.pool_schedule`,
docs/schedule.md "One schedule for the pool").

Each workload's records come from `schedule_calibration.grid_run` (n prompts of 16–64 tokens,
lognormal e2e, run-to-run and per-concurrency noise), each from its own seeded stream. At the
boundary every workload's every cell has true throughput ratio exactly 1 + margin, so the pool's
(a token-weighted harmonic mean of the workloads') is 1 + margin whatever the weights: the pool
schedule is "falsely ON" when it turns speculation on at any concurrency; the stated bound is
(1 − level)/2 = 2.5 %. Power: the workloads' true ratios differ (one gains, one does not) and the
share of (run, concurrency) decided ON is counted. No model, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specbench.analysis.calibration.schedule_calibration import grid_run
from specbench.analysis.decide.gamma_schedule import decide_cells
from specbench.analysis.decide.pool_schedule import PoolMember, pool_cells

Rate = tuple[float, float]


def _rate(hits: int, reps: int) -> Rate:
    p = hits / reps
    return p, math.sqrt(max(p * (1 - p), 1.0 / reps) / reps)


def _members(
    rng: np.random.Generator,
    n: int,
    gammas: Sequence[int],
    concurrencies: Sequence[int],
    ratios: Sequence[float],
    weights: Sequence[float],
) -> list[PoolMember]:
    total = sum(weights)
    out = []
    for i, (r, w) in enumerate(zip(ratios, weights, strict=True)):
        base, specs = grid_run(rng, n, gammas, concurrencies, float(r))
        out.append(PoolMember(f"w{i}", w / total, base, specs))
    return out


def _on_count(
    ratios: Sequence[float],
    weights: Sequence[float],
    n: int,
    gammas: Sequence[int],
    concurrencies: Sequence[int],
    reps: int,
    seed: int,
    n_boot: int,
    any_level: bool,
) -> int:
    rng = np.random.default_rng(seed)
    hits = 0
    for r in range(reps):
        cells, levels = pool_cells(_members(rng, n, gammas, concurrencies, ratios, weights))
        decisions, _ = decide_cells(cells, levels, 0.05, 0.95, n_boot, seed=seed * 7919 + r)
        on = [d.gamma > 0 for d in decisions]
        hits += int(any(on)) if any_level else sum(on)
    return hits


def pool_false_on_rate(
    n: int,
    gammas: Sequence[int],
    concurrencies: Sequence[int],
    weights: Sequence[float],
    reps: int,
    seed: int = 21,
    n_boot: int = 600,
) -> Rate:
    """P(the pool schedule is ON at any concurrency) when every cell of every workload has true
    throughput ratio 1 + margin (margin 0.05)."""
    ratios = [1.05] * len(weights)
    hits = _on_count(ratios, weights, n, gammas, concurrencies, reps, seed, n_boot, True)
    return _rate(hits, reps)


def pool_power(
    n: int,
    gammas: Sequence[int],
    concurrencies: Sequence[int],
    ratios: Sequence[float],
    weights: Sequence[float],
    reps: int,
    seed: int = 22,
    n_boot: int = 600,
) -> Rate:
    """P(ON at a concurrency) when workload i's every cell has true ratio ratios[i]."""
    hits = _on_count(ratios, weights, n, gammas, concurrencies, reps, seed, n_boot, False)
    return _rate(hits, reps * len(concurrencies))
