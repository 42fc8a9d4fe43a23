"""The γ schedule by concurrency: per measured concurrency the best γ or off, decided by the
selection-aware ON rule over the whole grid, and the contiguous ranges an engine takes
(docs/theory.md §15).

Throughput at concurrency c. In a closed loop that keeps c requests in flight, Little's law gives
throughput = c · Σ tokens / Σ e2e over the requests, so at equal c the throughput ratio of γ over
the engine without speculation is the paired ratio (Σ tok_γ / Σ e2e_γ) / (Σ tok_0 / Σ e2e_0) on
the same prompts (`latency.pair(..., end_to_end=True)`; TTFT is inside e2e, so the prefill work a
draft adds is counted). Intervals resample prompts (requests), repeats of a prompt one cluster.

Decision (the batch-1 rule, §8, extended to the grid). The candidates are every cell (c, γ > 0).
The same prompts run at every concurrency, so all cells are resampled jointly on the prompts they
share and the max-T bootstrap gives lower bounds L_{c,γ} that hold for every cell at once with
probability ≥ (1 + level)/2: P(any cell's true ratio < its L) ≤ 2.5 % at level 0.95. At each c
speculation is ON iff some L_{c,γ} > 1 + margin, with the γ of highest point ratio among those
that clear it, else off (k = 0). Because the bounds are simultaneous over γ *and* c, the chance
that the schedule turns speculation on at any concurrency where no γ truly beats 1 + margin is
≤ 2.5 %, however many cells. When fewer than two prompts are common to all cells, each
concurrency gets its own max-T over its γ's at the Bonferroni level 1 − (1 − level)/m (m
concurrencies), which keeps the same family-wise bound.

Monotone fill (docs/theory.md §15): a concurrency left off between two ON concurrencies takes
its γ of highest point ratio when that exceeds 1 + margin — speculation's gain does not rise with
the load, so the false-ON bound carries over; nothing is filled outside the ON concurrencies.

Ranges. Measured concurrencies c_1 < … < c_m with choices k_1 … k_m become [[lo, hi, k], …] from
1: [1, c_2 − 1] takes k_1 (below c_1 as well: c_1 is usually 1), the last range runs to
`open_end` (the choice at c_m carried beyond the measured range: extrapolated, flagged).
Between two measured concurrencies whose choices differ, the switch point s ∈ (c_j, c_{j+1}] is
where the fitted step-cost model (`batch_model`) predicts that k_{j+1} yields at least k_j's
throughput, τ(k)/T(b, k) compared at each integer b; without a model, or when the model predicts no
crossing there, s is the geometric midpoint ⌈√(c_j·c_{j+1})⌉. Either way it is interpolation,
not a measured decision, and the output says which rule set each boundary.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specbench.analysis.arithmetic.batch_model import StepCostModel
from specbench.analysis.decide.recommend import joint_replicates, one_sided
from specbench.analysis.documents.results_model_base import EstimateJSON, Num, est_model
from specbench.analysis.documents.results_model_engine import (
    EngineGammaCounters,
    ScheduleBoundary,
    ScheduleRow,
)
from specbench.analysis.estimators.latency import Paired, pair, speedup_of
from specbench.analysis.serving.serving_acceptance import concurrency_of
from specbench.analysis.stats.resampling import DEFAULT_SEED, simultaneous_lower
from specbench.analysis.stats.serialize import json_num
from specbench.record_line import RecordLine

Record = RecordLine
BoundaryRule = Literal["model", "geometric_midpoint"]
OPEN_END = 65536  # the last range's upper end: engines clamp it to their own max batch size


@dataclass(frozen=True)
class CellDecision:
    """One concurrency: each γ's throughput ratio with its simultaneous lower bound, and the choice."""

    concurrency: int
    ratios: dict[int, EstimateJSON | None]  # γ → its throughput ratio
    lower_bounds: dict[int, float | None]
    gamma: int  # 0 = off
    reason: str

    def row(
        self, throughput_tok_s: dict[str, Num], predicted_throughput_tok_s: dict[str, Num]
    ) -> ScheduleRow:
        """The decision as a schedule row of results.json (single workload and pool), with the
        measured and predicted throughput at this concurrency ("0": no speculation)."""
        return ScheduleRow(
            concurrency=self.concurrency,
            gamma=self.gamma,
            verdict="on" if self.gamma else "off",
            reason=self.reason,
            throughput_ratio={str(g): r for g, r in self.ratios.items()},
            decision_lower_bound={str(g): lb for g, lb in self.lower_bounds.items()},
            throughput_tok_s=throughput_tok_s,
            predicted_throughput_tok_s=predicted_throughput_tok_s,
        )


def _cells(
    base: Sequence[Record], specs: Mapping[int, Sequence[Record]]
) -> list[tuple[int, int, Paired]]:
    """(c, γ, paired e2e) for every concurrency the baseline measured and every γ > 0 there."""
    out = []
    levels = sorted({concurrency_of(r) for r in base})
    for c in levels:
        b = [r for r in base if concurrency_of(r) == c]
        for g in sorted(specs):
            if g <= 0:
                continue
            s = [r for r in specs[g] if concurrency_of(r) == c]
            p = pair(list(b), s, end_to_end=True)
            if len(p):
                out.append((c, g, p))
    return out


def _bounds(
    cells: list[tuple[int, int, Paired]], level: float, n_boot: int, seed: int
) -> tuple[list[float], str]:
    """Simultaneous lower bounds of every cell's ratio (module docstring), and how they were got."""
    joint = joint_replicates([p for _, _, p in cells], n_boot, seed) if cells else None
    if joint is not None:
        bounds, _ = simultaneous_lower(joint[0], level)
        starts = {k[1] for _, _, p in cells for k in p.keys}
        crossed = (
            f"; prompts and {len(starts)} engine starts as crossed factors (multivariate t)"
            if all(p.by_start for _, _, p in cells)
            else ""
        )
        return [float(x) for x in bounds], f"max-T over all {len(cells)} cells jointly{crossed}"
    levels = sorted({c for c, _, _ in cells})
    adj = 1.0 - (1.0 - level) / max(len(levels), 1)
    out = [math.nan] * len(cells)
    for c in levels:
        idx = [i for i, cell in enumerate(cells) if cell[0] == c]
        rep = joint_replicates([cells[i][2] for i in idx], n_boot, seed + c)
        if rep is None:
            continue
        bounds, _ = simultaneous_lower(rep[0], adj)
        for i, b in zip(idx, bounds, strict=True):
            out[i] = float(b)
    return out, f"max-T per concurrency at the Bonferroni level {adj:.4g} ({len(levels)} levels)"


def decide_schedule(
    base: Sequence[Record],
    specs: Mapping[int, Sequence[Record]],
    margin: float,
    level: float,
    n_boot: int,
    seed: int = DEFAULT_SEED,
) -> tuple[list[CellDecision], str]:
    """Per measured concurrency, the best γ or off (module docstring); and the family rule used."""
    levels = sorted({concurrency_of(r) for r in base})
    return decide_cells(_cells(base, specs), levels, margin, level, n_boot, seed)


def decide_cells(
    cells: list[tuple[int, int, Paired]],
    levels: Sequence[int],
    margin: float,
    level: float,
    n_boot: int,
    seed: int = DEFAULT_SEED,
) -> tuple[list[CellDecision], str]:
    """`decide_schedule` on given cells (c, γ, paired throughput): one workload's, or a pool's
    (`analysis.decide.pool_schedule`), decided by the same simultaneous rule and monotone fill."""
    bounds, how = _bounds(cells, level, n_boot, seed)
    out = []
    for c in levels:
        here = [(g, p, lb) for (cc, g, p), lb in zip(cells, bounds, strict=True) if cc == c]
        ests = {g: speedup_of(p, n_boot, level) for g, p, _ in here}
        ratios = {g: est_model(e) for g, e in ests.items()}
        lbs = {g: json_num(lb) for g, _, lb in here}
        point = {g: e.value if e else -math.inf for g, e in ests.items()}
        clear = [g for g, _, lb in here if math.isfinite(lb) and lb > 1.0 + margin]
        if clear:
            k = max(clear, key=lambda g: point[g])
            reason = f"γ={k}: simultaneous lower bound {lbs[k]:.3f} > 1 + margin {margin:g}"
        else:
            k = 0
            reason = (
                f"no γ's simultaneous lower bound clears 1 + margin {margin:g}"
                if here
                else "no speculative setting measured here"
            )
        out.append(CellDecision(c, ratios, lbs, k, reason))
    return fill_between(out, margin), how + "; gaps between ON concurrencies filled (monotone)"


def fill_between(decisions: list[CellDecision], margin: float) -> list[CellDecision]:
    """A concurrency left off between two concurrencies that are ON is ON too, with its γ of
    highest point ratio (module docstring, "Monotone fill"): speculation's gain does not rise
    with the load, so if it pays at a higher concurrency it pays here, and the family-wise
    false-ON bound carries over. Left off when no γ's point ratio there exceeds 1 + margin."""
    on = [i for i, d in enumerate(decisions) if d.gamma > 0]
    if len(on) < 2:
        return decisions
    out = list(decisions)
    for i in range(on[0] + 1, on[-1]):
        d = out[i]
        if d.gamma > 0:
            continue
        points = {
            g: float(r.value)
            for g, r in d.ratios.items()
            if r is not None and r.value is not None and float(r.value) > 1.0 + margin
        }
        if not points:
            continue
        k = max(points, key=lambda g: points[g])
        above = next(out[j].concurrency for j in on if j > i)
        reason = (
            f"γ={k}: filled — ON at concurrency {above} above it and speculation's gain does not "
            f"rise with the load (its own simultaneous lower bound {d.lower_bounds[k]} does not "
            f"clear 1 + margin {margin:g})"
        )
        out[i] = CellDecision(d.concurrency, d.ratios, d.lower_bounds, k, reason)
    return out


def model_switch(
    model: StepCostModel | None, tau: Mapping[int, float]
) -> Callable[[int, int, int, int], tuple[int, BoundaryRule]]:
    """The boundary rule between two measured concurrencies (module docstring)."""

    def switch(c_lo: int, c_hi: int, k_lo: int, k_hi: int) -> tuple[int, BoundaryRule]:
        if model is not None and k_lo in tau and k_hi in tau:
            for b in range(c_lo + 1, c_hi + 1):
                if tau[k_hi] / model.predict_step_ms(b, k_hi) >= tau[k_lo] / model.predict_step_ms(
                    b, k_lo
                ):
                    return b, "model"
        return max(c_lo + 1, math.ceil(math.sqrt(c_lo * c_hi))), "geometric_midpoint"

    return switch


def schedule_ranges(
    choices: Sequence[tuple[int, int]],
    switch: Callable[[int, int, int, int], tuple[int, BoundaryRule]],
    open_end: int = OPEN_END,
) -> tuple[list[tuple[int, int, int]], list[ScheduleBoundary]]:
    """[[lo, hi, k], …] covering 1 … open_end from (concurrency, k) per measured concurrency, and
    each boundary with the rule that placed it."""
    pts = sorted(choices)
    if not pts:
        return [], []
    ranges: list[tuple[int, int, int]] = []
    boundaries: list[ScheduleBoundary] = []
    lo, k = 1, pts[0][1]
    for (c0, k0), (c1, k1) in itertools.pairwise(pts):
        if k1 == k0:
            continue
        s, rule = switch(c0, c1, k0, k1)
        ranges.append((lo, s - 1, k))
        boundaries.append(ScheduleBoundary(between=(c0, c1), at=s, rule=rule))
        lo, k = s, k1
    ranges.append((lo, max(open_end, lo), k))
    return ranges, boundaries


def gamma_at(ranges: Sequence[Sequence[int]], b: int) -> int:
    """The schedule's k at batch size b (past the last range: the last range's k)."""
    for lo, hi, k in ranges:
        if lo <= b <= hi:
            return int(k)
    return int(ranges[-1][2]) if ranges else 0


def accept_lengths(per_gamma: Mapping[str, EngineGammaCounters]) -> dict[int, float]:
    """τ per γ from the engine section's counter estimators (1 for γ = 0)."""
    out = {0: 1.0}
    for g, pg in per_gamma.items():
        v = pg.mean_accepted_length.value if pg.mean_accepted_length else None
        if v is not None and np.isfinite(v):
            out[int(g)] = float(v)
    return out


def family_rate(level: float) -> float:
    return 1.0 - one_sided(level)
