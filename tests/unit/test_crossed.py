"""Intervals over prompts × engine starts (analysis/stats/crossed.py; docs/theory.md §15, "Engine starts").

Seeded simulations of an interleaved engine run: 16 prompts, each measured once per engine start,
every engine start (baseline and each setting) with its own throughput multiplier. The crossed
interval must cover the true pooled ratio at its nominal level; the prompt-only interval, which
treats the starts as fixed, must be shown to fail there (that is why the crossed one exists); and
the simultaneous lower bounds over several settings must keep the family-wise miss rate.
"""

from __future__ import annotations

import numpy as np
import pytest

from specbench.analysis.decide.recommend import recommend
from specbench.analysis.estimators.latency import pair, speedup_of
from specbench.analysis.stats.crossed import crossed_ratio_ci, crossed_replicates, two_way_variance
from specbench.analysis.stats.resampling import (
    THROUGHPUT_RATIO_COEFS,
    simultaneous_lower,
    throughput_ratio_ci,
)

SIMS = 300


def _mean_one(rng: np.random.Generator, sd: float, size: int) -> np.ndarray:
    """Log-normal multipliers of mean 1: the pooled ratio's truth is then exactly S."""
    return np.exp(sd * rng.standard_normal(size) - sd * sd / 2)


def _simulate(
    rng: np.random.Generator,
    truths: list[float],
    prompts: int,
    starts: int,
    sd_p: float,
    sd_e: float,
) -> tuple[list[list[np.ndarray]], np.ndarray, np.ndarray]:
    """Per setting [tok_new, ms_new, tok_base, ms_base] over units (prompt, start)."""
    rows = np.repeat(np.arange(prompts), starts)
    cols = np.tile(np.arange(starts), prompts)
    tok = np.repeat(rng.integers(20, 60, size=prompts).astype(float), starts)
    base = tok * 10 * _mean_one(rng, sd_e, starts)[cols] * _mean_one(rng, 0.03, len(tok))
    cands = []
    for s in truths:
        prompt_effect, start_effect = _mean_one(rng, sd_p, prompts), _mean_one(rng, sd_e, starts)
        noise = _mean_one(rng, 0.03, len(tok))
        spec = tok * 10 / s * prompt_effect[rows] * start_effect[cols] * noise
        cands.append([tok, spec, tok, base])
    return cands, rows, cols


def _coverage(starts: int, sd_p: float, sd_e: float) -> tuple[float, float]:
    """(crossed, prompt-only) coverage of the 95 % interval of a ratio of 1.2."""
    rng = np.random.default_rng(7)
    crossed = prompt_only = 0
    for _ in range(SIMS):
        (arrays,), rows, cols = _simulate(rng, [1.2], 16, starts, sd_p, sd_e)
        est = crossed_ratio_ci(arrays, rows, cols)
        crossed += est.lo <= 1.2 <= est.hi
        naive = throughput_ratio_ci(*arrays, n_boot=300, clusters=list(rows))
        prompt_only += naive.lo <= 1.2 <= naive.hi
    return crossed / SIMS, prompt_only / SIMS


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_crossed_interval_covers_when_starts_dominate() -> None:
    crossed, prompt_only = _coverage(starts=4, sd_p=0.1, sd_e=0.2)
    se = (0.95 * 0.05 / SIMS) ** 0.5
    assert crossed >= 0.95 - 2 * se, crossed
    assert prompt_only < 0.6, prompt_only  # the starts treated as fixed: far below 0.95


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_crossed_interval_covers_with_mixed_effects() -> None:
    crossed, prompt_only = _coverage(starts=3, sd_p=0.2, sd_e=0.1)
    se = (0.95 * 0.05 / SIMS) ** 0.5
    assert crossed >= 0.95 - 2 * se, crossed
    assert prompt_only < 0.9, prompt_only


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_simultaneous_bounds_keep_the_family_rate() -> None:
    """Three settings sharing prompts and starts: P(any true ratio below its bound) ≤ 2.5 %."""
    rng = np.random.default_rng(11)
    truths = [1.1, 1.2, 1.3]
    misses = 0
    for i in range(SIMS):
        cands, rows, cols = _simulate(rng, truths, 16, 4, 0.1, 0.2)
        bounds, _ = simultaneous_lower(
            crossed_replicates(cands, rows, cols, n_boot=500, seed=i), 0.95
        )
        misses += any(b > t for b, t in zip(bounds, truths, strict=True))
    se = (0.025 * 0.975 / SIMS) ** 0.5
    assert misses / SIMS <= 0.025 + 2 * se, misses / SIMS


def test_two_way_variance_reduces_to_the_prompt_variance_without_start_effects() -> None:
    """One start: V is the prompt-clustered delta-method variance (the start part is 0)."""
    rng = np.random.default_rng(3)
    (arrays,), rows, cols = _simulate(rng, [1.2], 16, 1, 0.2, 0.0)
    x = np.stack(arrays)[None]
    _, var, _ = two_way_variance(x, np.asarray(THROUGHPUT_RATIO_COEFS), rows, cols)
    c = np.asarray(THROUGHPUT_RATIO_COEFS)
    z = (c[:, None] * x[0] / x[0].mean(axis=-1, keepdims=True)).sum(axis=0)
    z = z - z.mean()
    assert np.isclose(var[0], (16 / 15) * (z**2).sum() / 16**2)


def _records(kind: str, gamma: int, ms: dict[tuple[str, int], float], start: bool) -> list[dict]:
    return [
        {
            "kind": kind,
            "gamma": gamma,
            "prompt_id": p,
            "repeat": r,
            "new_tokens": 33,
            "wall_ms": v,
            "ttft_ms": [10.0],
            "tpot_ms": (v - 10.0) / 32,
            **({"engine_start": r} if start else {}),
        }
        for (p, r), v in ms.items()
    ]


def test_records_with_engine_starts_get_the_crossed_interval() -> None:
    """`pair` marks records that carry engine_start, and `speedup_of` then resamples the starts:
    the interval is wider than the prompt-only one when the starts disagree."""
    rng = np.random.default_rng(5)
    start_effect = [1.0, 1.25, 0.85, 1.1]
    base = {(f"p{i}", r): 100.0 + rng.normal(0, 3) for i in range(8) for r in range(4)}
    spec = {k: v / 1.3 * start_effect[k[1]] for k, v in base.items()}
    crossed = pair(_records("baseline", 0, base, True), _records("spec", 2, spec, True), True)
    plain = pair(_records("baseline", 0, base, False), _records("spec", 2, spec, False), True)
    assert crossed.by_start and not plain.by_start
    wide, narrow = speedup_of(crossed, 300, 0.95), speedup_of(plain, 300, 0.95)
    assert wide is not None and narrow is not None
    assert np.isclose(wide.value, narrow.value)
    assert wide.hi / wide.lo > 1.5 * (narrow.hi / narrow.lo)


def test_crossed_verdict_is_undecided_below_the_prompt_resolution() -> None:
    """A run with interleaved engine starts keeps the two-way test, and, like every verdict,
    decides nothing on fewer than 6 prompts however clear the gain (docs/theory.md §8, §15)."""
    rng = np.random.default_rng(2806)
    start_effect = [1.0, 1.05, 0.95, 1.02]

    def verdict(prompts: int) -> str:
        base = {(f"p{i}", r): 100.0 + rng.normal(0, 3) for i in range(prompts) for r in range(4)}
        spec = {k: v / 1.6 * start_effect[k[1]] for k, v in base.items()}
        settings = {("model", "fixed", 2): _records("spec", 2, spec, True)}
        return str(
            recommend(_records("baseline", 0, base, True), settings, 0.05, 0.95, 300).verdict
        )

    assert verdict(5) == "undecided"
    assert verdict(8) == "on"
