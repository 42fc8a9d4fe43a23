"""Seeded simulation of the γ schedule's false-ON rate at the boundary (docs/theory.md §15).

Every cell (concurrency c, γ) has true throughput ratio exactly 1 + margin over the engine without
speculation; the schedule is "falsely ON" when it turns speculation on at any concurrency. The
stated bound is (1 − level)/2 = 2.5 % for the whole schedule (`gamma_schedule.decide_schedule`).
The naive rule — at each concurrency, the point-best γ's own interval — is measured beside it
for contrast. Data: n prompts of 16–64 tokens, e2e latency lognormal σ = 0.3 across prompts,
each cell's run-to-run noise σ = 0.15 per prompt plus a per-prompt component σ = 0.1 shared by
the cells of one concurrency (they ran beside each other). No model, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from specbench.analysis.decide.gamma_schedule import decide_schedule
from specbench.analysis.estimators.latency import pair, speedup_of
from specbench.record_line import RecordLine

Rate = tuple[float, float]
Record = RecordLine


def _rate(hits: int, reps: int) -> Rate:
    p = hits / reps
    return p, math.sqrt(max(p * (1 - p), 1.0 / reps) / reps)


def _rec(pid: str, gamma: int, c: int, tokens: float, wall_ms: float) -> Record:
    return {
        "prompt_id": pid,
        "repeat": 0,
        "gamma": gamma,
        "concurrency": c,
        "new_tokens": tokens,
        "wall_ms": wall_ms,
    }


def grid_run(
    rng: np.random.Generator,
    n: int,
    gammas: Sequence[int],
    concurrencies: Sequence[int],
    ratio: float | dict[tuple[int, int], float],
) -> tuple[list[Record], dict[int, list[Record]]]:
    """Baseline and γ records at every concurrency; `ratio` the true throughput ratio of every cell
    (a number) or per (c, γ)."""
    tok = rng.integers(16, 65, n).astype(float)
    per_prompt = rng.lognormal(0.0, 0.3, n)
    base: list[Record] = []
    specs: dict[int, list[Record]] = {g: [] for g in gammas}
    var = 0.15**2 + 0.1**2
    for c in concurrencies:
        ms_base = tok * per_prompt * c**0.3 * np.exp(rng.normal(0, 0.1, n) - 0.005)
        base += [_rec(f"p{i}", 0, c, tok[i], ms_base[i]) for i in range(n)]
        shared = rng.normal(0, 0.1, n)
        for g in gammas:
            r = ratio if isinstance(ratio, float | int) else ratio[(c, g)]
            ms = ms_base / r * np.exp(shared + rng.normal(0, 0.15, n) - var / 2)
            specs[g] += [_rec(f"p{i}", g, c, tok[i], ms[i]) for i in range(n)]
    return base, specs


Count = Callable[[list[Record], dict[int, list[Record]], int], int]


def _replicate(
    n: int,
    gammas: Sequence[int],
    concurrencies: Sequence[int],
    ratio: float,
    reps: int,
    seed: int,
    count: Count,
) -> int:
    """Σ over `reps` seeded grid runs of count(base, specs, replicate index)."""
    rng = np.random.default_rng(seed)
    return sum(count(*grid_run(rng, n, gammas, concurrencies, ratio), r) for r in range(reps))


def schedule_false_on_rate(
    n: int,
    gammas: Sequence[int],
    concurrencies: Sequence[int],
    reps: int,
    seed: int = 5,
    margin: float = 0.05,
    n_boot: int = 600,
) -> Rate:
    """P(the schedule is ON at any concurrency) when every cell's true ratio is 1 + margin."""

    def on_anywhere(base: list[Record], specs: dict[int, list[Record]], r: int) -> int:
        decisions, _ = decide_schedule(base, specs, margin, 0.95, n_boot, seed=seed * 7919 + r)
        return int(any(d.gamma > 0 for d in decisions))

    hits = _replicate(n, gammas, concurrencies, 1.0 + margin, reps, seed, on_anywhere)
    return _rate(hits, reps)


def schedule_power(
    n: int,
    gammas: Sequence[int],
    concurrencies: Sequence[int],
    ratio: float,
    reps: int,
    seed: int = 6,
    n_boot: int = 600,
) -> Rate:
    """P(ON at a concurrency) when every cell's true ratio is `ratio` (the share of runs ×
    concurrencies decided ON; all m at once is roughly this to the power m)."""

    def on_count(base: list[Record], specs: dict[int, list[Record]], r: int) -> int:
        decisions, _ = decide_schedule(base, specs, 0.05, 0.95, n_boot, seed=seed * 7919 + r)
        return sum(d.gamma > 0 for d in decisions)

    hits = _replicate(n, gammas, concurrencies, ratio, reps, seed, on_count)
    return _rate(hits, reps * len(concurrencies))


def naive_schedule_false_on_rate(
    n: int,
    gammas: Sequence[int],
    concurrencies: Sequence[int],
    reps: int,
    seed: int = 5,
    margin: float = 0.05,
    n_boot: int = 600,
) -> Rate:
    """The same, with each concurrency's point-best γ tested on its own 95 % interval."""

    def naive_on(base: list[Record], specs: dict[int, list[Record]], _: int) -> int:
        for c in concurrencies:
            b = [x for x in base if x["concurrency"] == c]
            ests = [
                speedup_of(
                    pair(b, [x for x in specs[g] if x["concurrency"] == c], True), n_boot, 0.95
                )
                for g in gammas
            ]
            best = max((e for e in ests if e is not None), key=lambda e: e.value)
            if best.lo > 1.0 + margin:
                return 1
        return 0

    hits = _replicate(n, gammas, concurrencies, 1.0 + margin, reps, seed, naive_on)
    return _rate(hits, reps)
