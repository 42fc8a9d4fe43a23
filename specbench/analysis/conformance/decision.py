"""One engine-vs-reference comparison (τ and the per-position a_i with bootstrap intervals, and
the shortfall tests that judge them) and the family-wise verdict over every comparison of a run:
adjusted p ≤ 1 − ci_level AND a relative shortfall above the minimum effect."""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

from specbench.analysis.conformance.permutation import (
    PERMUTATIONS,
    ShortfallTest,
    family_adjusted_p,
)
from specbench.analysis.conformance.units import Units
from specbench.analysis.documents.results_model_engine import ConformanceRow, ConformanceStat
from specbench.analysis.stats.resampling import DEFAULT_SEED, bootstrap

MIN_ROUNDS = 20  # a_i is tested when the two runs together reached position i − 1 ≥ 2× this often


@dataclass
class Measurement:
    """One engine-vs-reference comparison: τ and each a_i (None where a side never reached
    position i; both None when fewer than two prompts are shared: verdict "insufficient"), and
    its verdict once `judge` has set it (None before)."""

    n_prompts: int
    verdict: Literal["ok", "higher", "shortfall", "insufficient"] | None = None
    tau: ConformanceStat | None = None
    positions: list[ConformanceStat | None] | None = None
    family_tests: int | None = None

    def row(self, workload: str, temperature: float, gamma: int) -> ConformanceRow:
        """results.json's row of this judged comparison (an insufficient one: the counts only)."""
        if self.verdict is None:
            raise ValueError("a comparison is written once judged (conformance.decision.judge)")
        row = ConformanceRow(
            workload=workload,
            temperature=temperature,
            gamma=gamma,
            n_prompts=self.n_prompts,
            verdict=self.verdict,
        )
        if self.verdict != "insufficient":
            row.mean_accepted_length = self.tau
            row.per_position = self.positions
            row.family_tests = self.family_tests
        return row


Measured = tuple[Measurement, list[tuple[ConformanceStat, ShortfallTest]]]


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        s = den.sum(axis=1)
        return np.where(s > 0, num.sum(axis=1) / s, np.nan)


def measure(
    eng: Units, ref: Units, gamma: int, n_boot: int, level: float, unit_prefix: Hashable = ""
) -> Measured:
    """One comparison's row (τ and a_i, engine vs reference, bootstrap CIs; no verdict yet) and
    its shortfall tests, each with the row entry it judges. `n_boot` 0 skips the intervals."""
    common = sorted(set(eng) & set(ref))
    if len(common) < 2 or not sum(eng[k][1] for k in common) or not sum(ref[k][1] for k in common):
        return Measurement(len(common), "insufficient"), []
    keys: list[Hashable] = [(unit_prefix, k) for k in common]
    ea = np.asarray([eng[k][0] for k in common])
    ed = np.asarray([eng[k][1] for k in common])
    ep = np.asarray([eng[k][2] for k in common]).reshape(len(common), gamma)
    ra = np.asarray([ref[k][0] for k in common])
    rd = np.asarray([ref[k][1] for k in common])
    rp = np.asarray([ref[k][2] for k in common]).reshape(len(common), gamma)

    def diff_of(n_e: np.ndarray, d_e: np.ndarray, n_r: np.ndarray, d_r: np.ndarray) -> Any:
        return _ratio(n_e, d_e) - _ratio(n_r, d_r)

    def entry(ne: np.ndarray, de: np.ndarray, nr: np.ndarray, dr: np.ndarray) -> ConformanceStat:
        point_e, point_r = float(ne.sum() / de.sum()), float(nr.sum() / dr.sum())
        lo = hi = math.nan
        if n_boot > 0:
            est = bootstrap(diff_of, [ne, de, nr, dr], n_boot, level)
            lo, hi = est.lo, est.hi
        rel = (point_r - point_e) / point_r if point_r > 0 else 0.0
        return ConformanceStat(
            detectable_shortfall=detectable_shortfall(lo, hi, point_r, level),
            engine=round(point_e, 6),
            reference=round(point_r, 6),
            diff=round(point_e - point_r, 6),
            ci95=(_r(lo), _r(hi)),
            relative_shortfall=round(rel, 6),
            p_adjusted=None,
            shortfall=False,
            # informational only, not a failure: the whole interval above 0 and above min_effect
            higher=bool(math.isfinite(lo) and lo > 0),
        )

    tests: list[tuple[ConformanceStat, ShortfallTest]] = []
    tau = entry(ea, ed, ra, rd)
    tau.engine, tau.reference = round(1 + tau.engine, 6), round(1 + tau.reference, 6)
    tests.append((tau, ShortfallTest(keys, ea, ed, ra, rd)))
    positions: list[ConformanceStat | None] = []
    for i in range(gamma):
        de = ed if i == 0 else ep[:, i - 1]
        dr = rd if i == 0 else rp[:, i - 1]
        if de.sum() == 0 or dr.sum() == 0:
            positions.append(None)  # a side never reached position i: a_i is undefined there
            continue
        pos = entry(ep[:, i], de, rp[:, i], dr)
        pos.position = i + 1
        positions.append(pos)
        # Tiny counts (deep positions) are left untested; the rule is swap-invariant (the two runs'
        # total), so leaving them out cannot bias the permutation test.
        if de.sum() + dr.sum() >= 2 * MIN_ROUNDS:
            tests.append((pos, ShortfallTest(keys, ep[:, i], de, rp[:, i], dr)))
        else:
            pos.untested = f"fewer than {2 * MIN_ROUNDS} rounds reached it in the two runs"
    return Measurement(len(common), tau=tau, positions=positions), tests


def detectable_shortfall(lo: float, hi: float, reference: float, level: float) -> float | None:
    """The relative shortfall the test detects with 80 % power, (z_{1−a} + z_0.8)·se / reference,
    se from the interval's width (docs/theory.md §8: every decision states its power); None where
    it is unbounded — a shortfall above 100 % of the reference is not a quantity."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or reference <= 0:
        return None
    z = NormalDist()
    se = (hi - lo) / (2 * z.inv_cdf(0.5 + level / 2))
    mde = (z.inv_cdf(level) + z.inv_cdf(0.8)) * se / reference
    return round(mde, 6) if 0 <= mde <= 1 else None


def judge(
    measured: list[Measured],
    alpha: float,
    min_effect: float,
    n_perm: int = PERMUTATIONS,
    seed: int = DEFAULT_SEED,
) -> None:
    """Set each row's verdict from one family-wise test over every row's tests (in place)."""
    flat = [(e, t) for _, tests in measured for e, t in tests]
    p_adj = family_adjusted_p([t for _, t in flat], n_perm, seed)
    for (e, _), p in zip(flat, p_adj, strict=True):
        e.p_adjusted = _r(p)
        e.shortfall = bool(math.isfinite(p) and p <= alpha and e.relative_shortfall > min_effect)
        e.higher = bool(e.higher and -e.relative_shortfall > min_effect)
    for row, tests in measured:
        if row.verdict == "insufficient" or row.tau is None:
            continue
        short = any(e.shortfall for e, _ in tests)
        higher = row.tau.higher and not short
        row.family_tests = len(flat)
        row.verdict = "shortfall" if short else ("higher" if higher else "ok")


def compare(
    eng: Units, ref: Units, gamma: int, n_boot: int, level: float, min_effect: float
) -> Measurement:
    """One comparison judged on its own: τ and a_i of engine vs reference, family-wise level
    1 − `level` (one-sided) over τ and the tested a_i."""
    m = measure(eng, ref, gamma, n_boot, level)
    judge([m], 1 - level, min_effect)
    return m[0]


def _r(x: float) -> float | None:
    return round(float(x), 6) if math.isfinite(x) else None
