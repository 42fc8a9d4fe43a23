"""The adaptive plan's sequential verdict measured under optional stopping on the realistic family
(docs/theory.md §14, §10).

Each replicate draws a cell's prompts from `analysis.calibration.traffic_family` with a known truth (every
candidate at the same true speedup) and feeds them to the rule one prompt at a time, as the plan
does: at each look the sign-flip verdict, between looks the futility stop, and at the stopping
prompt the project's own `sequential.decide` gives the state and the bounds that are recorded.
A fast screen (the same sign-flip p-values without inverting bounds) finds the look at which a
replicate stops; `Stopping.mismatch` counts the replicates where the production verdict at that
prompt disagrees with the screen (the tests assert none). benchmarks/bench_calibration.py prints
`sequential_rows` at ≥ 4,000 replicates with fresh seeds; tests/unit/test_sequential.py asserts
them at fewer, with fixed seeds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from specbench.analysis.calibration import traffic_family as tf
from specbench.analysis.stats import sequential as sq
from specbench.analysis.stats import signflip
from specbench.analysis.stats.signflip import throughput_pivots

Rate = tuple[float, float]
LINE = 1.05  # 1 + the default margin
SIDE = 0.025  # each one-sided error rate


def rate(hits: int | float, reps: int) -> Rate:
    p = float(hits) / reps
    return p, math.sqrt(max(p * (1 - p), 1.0 / reps) / reps)


def settings(cap: int | None) -> sq.SequenceSettings:
    return sq.SequenceSettings(margin=LINE - 1.0, alpha=2 * SIDE, n_max=cap)


@dataclass(frozen=True)
class Cells:
    """`reps` cells of K candidates over `cap` prompts: the four per-prompt arrays (reps, K, cap)."""

    tok_new: np.ndarray
    ms_new: np.ndarray
    tok_base: np.ndarray
    ms_base: np.ndarray
    truth: float

    @property
    def reps(self) -> int:
        return int(self.tok_new.shape[0])

    def arrays(self, r: int, m: int) -> dict[str, list[np.ndarray]]:
        """Replicate r's first m prompts as `sequential.decide` takes them."""
        k = self.tok_new.shape[1]
        return {
            f"c{j}": [a[r, j, :m] for a in (self.tok_new, self.ms_new, self.tok_base, self.ms_base)]
            for j in range(k)
        }


def draw(cap: int, k: int, speedup: float, reps: int, seed: int, fam: tf.Family) -> Cells:
    gammas = (2,) if k == 1 else tuple(range(1, k + 1))
    tb, mb, ts, ms = tf.draw_at(np.random.default_rng(seed), reps, cap, gammas, fam, speedup)
    tb_k = np.broadcast_to(tb[:, None, :], (reps, k, cap))
    mb_k = np.broadcast_to(mb[:, None, :], (reps, k, cap))
    return Cells(np.moveaxis(ts, 0, 1), np.moveaxis(ms, 0, 1), tb_k, mb_k, speedup)


def screen(y: np.ndarray, x: np.ndarray, theta0: float, alpha: float) -> str:
    """`signflip.decide`'s outcome without its bounds (for speed)."""
    return signflip.outcome(signflip.RatioPivots(y, x), theta0, alpha)


def running(cells: Cells) -> tuple[np.ndarray, np.ndarray]:
    """log Ŝ and the per-prompt sd of log Ŝ (at the line) after each prompt: (reps, K, cap) each,
    as `sequential.decide` computes them on a prefix (`signflip.se_log` × √m)."""
    piv = throughput_pivots(cells.tok_new, cells.ms_new, cells.tok_base, cells.ms_base)
    y, x = piv.y, piv.x
    m = np.arange(1, y.shape[-1] + 1, dtype=float)
    d = y - LINE * x
    mean_d = np.cumsum(d, axis=-1) / m
    with np.errstate(divide="ignore", invalid="ignore"):
        var = (np.cumsum(d**2, axis=-1) - m * mean_d**2) / (m - 1)
        sd = np.sqrt(np.maximum(var, 0.0)) / (LINE * np.cumsum(x, axis=-1) / m)
        log_s = np.log(np.cumsum(y, axis=-1) / np.cumsum(x, axis=-1))
    return log_s, np.where(m >= 2, sd, np.nan)


@dataclass(frozen=True)
class Stopping:
    on: Rate
    off: Rate
    undecided: Rate  # stopped undecided at the cap (futile ones not included)
    futile: Rate
    lower_miss: Rate  # some candidate's lower bound above the truth at the stopping prompt
    upper_miss: Rate  # the first candidate's upper bound below the truth there
    mean_stop: float  # mean prompts measured when the cell stopped
    mismatch: int  # stops where the production verdict disagreed with the screen (must be 0)
    reps: int


def optional_stopping(cells: Cells, cap: int, futility: bool) -> Stopping:
    """Feed each replicate's prompts one at a time to the rule (module docstring); `futility`:
    the plan's futility stop too, with `cap` the cell's prompt supply."""
    s = settings(cap)
    looks = {lk.n: lk.alpha for lk in s.looks}
    piv = throughput_pivots(cells.tok_new, cells.ms_new, cells.tok_base, cells.ms_base)
    fut = np.zeros((cells.reps, cap), bool)
    if futility:
        log_s, sd = running(cells)
        for m in range(sq.FUTILITY_FROM, cap):
            fut[:, m - 1] = sq.futile(log_s[..., m - 1], sd[..., m - 1], m, cap - m, s)
    counts = dict.fromkeys(("on", "off", "undecided", "futile"), 0)
    lower = upper = mismatch = 0
    stops = []
    for r in range(cells.reps):
        expect, at = "undecided", cap
        for m in range(1, cap + 1):
            if m in looks:
                out = screen(piv.y[r, :, :m], piv.x[r, :, :m], LINE, looks[m])
                if out != "undecided":
                    expect, at = out, m
                    break
            if fut[r, m - 1]:
                expect, at = "futile", m
                break
        d = sq.decide(cells.arrays(r, at), s, cap - at if futility else None)
        state = "futile" if d.futile else d.state
        mismatch += state != expect
        counts[state] += 1
        stops.append(at)
        lower += any(b.lo > cells.truth for b in d.bounds)
        upper += d.bounds[0].hi < cells.truth
    reps = cells.reps
    return Stopping(
        rate(counts["on"], reps), rate(counts["off"], reps), rate(counts["undecided"], reps),
        rate(counts["futile"], reps), rate(lower, reps), rate(upper, reps),
        float(np.mean(stops)), mismatch, reps,
    )  # fmt: skip


def naive_false_on(cells: Cells, cap: int) -> Rate:
    """The check the design replaces: the fixed-n verdict (one sign-flip test at the full 2.5 %,
    `signflip.decide`) taken after every prompt from the test's resolution to `cap`, stopping at
    the first ON."""
    piv = throughput_pivots(cells.tok_new, cells.ms_new, cells.tok_base, cells.ms_base)
    hits = 0
    for r in range(cells.reps):
        for m in range(signflip.min_prompts(SIDE), cap + 1):
            if screen(piv.y[r, :, :m], piv.x[r, :, :m], LINE, SIDE) == "on":
                sub = signflip.RatioPivots(piv.y[r, :, :m], piv.x[r, :, :m])
                hits += signflip.decide(sub, LINE, SIDE).outcome == "on"
                break
    return rate(hits, cells.reps)


@dataclass(frozen=True)
class Row:
    """One printed line: the check, its rate ± MC se, the target, whether it is met (None: a
    figure reported without a target), and what else the run measured."""

    check: str
    rate: float
    se: float
    target: str
    met: bool | None
    note: str


def _at_most(r: Rate, x: float) -> bool:
    return r[0] <= x + 2 * r[1]


def sequential_rows(reps: int, seed: int, fam: tf.Family = tf.Family()) -> Iterator[Row]:
    """Every figure of docs/theory.md §14's table: false ON and false OFF at the line under
    optional stopping (caps 8, 24, 48; K = 1, 3), the futility stop's effect there, power and the
    bounds' one-sided misses at the stopping prompt at a true 1.4× and 1.6× (K = 3), and the naive
    fixed-n check after every prompt. Yields each row as soon as it is measured (the whole set
    takes about 20 minutes a 1,000 replicates on one busy core)."""
    i = 0
    for cap in (8, 24, 48):
        for k in (1, 3):
            i += 1
            cells = draw(cap, k, LINE, reps, seed + i, fam)
            for futility in (False, True):
                o = optional_stopping(cells, cap, futility)
                tag = f"cap {cap}, K = {k}, futility {'on' if futility else 'off'}"
                note = (
                    f"undecided {o.undecided[0]:.3f} futile {o.futile[0]:.3f} "
                    f"mean stop {o.mean_stop:.1f} mismatch {o.mismatch}"
                )
                ok_on = _at_most(o.on, SIDE) and o.mismatch == 0
                yield Row(f"false ON at the line, {tag}", *o.on, "≤ 0.025", ok_on, note)
                ok_off = _at_most(o.off, SIDE) and o.mismatch == 0
                yield Row(f"false OFF at the line, {tag}", *o.off, "≤ 0.025", ok_off, "")
    for cap in (8, 24, 48):
        for speedup in (1.4, 1.6):
            i += 1
            cells = draw(cap, 3, speedup, reps, seed + i, fam)
            for futility in (False, True):
                o = optional_stopping(cells, cap, futility)
                tag = f"true {speedup}×, cap {cap}, K = 3, futility {'on' if futility else 'off'}"
                note = f"futile {o.futile[0]:.3f} mean stop {o.mean_stop:.1f} mismatch {o.mismatch}"
                yield Row(f"P(ON), {tag}", *o.on, "(power)", None, note)
                for name, miss in (("lower", o.lower_miss), ("upper", o.upper_miss)):
                    ok = _at_most(miss, SIDE) and o.mismatch == 0
                    yield Row(f"{name} bound misses at the stop, {tag}", *miss, "≤ 0.025", ok, "")
    i += 1
    naive = naive_false_on(draw(48, 1, LINE, reps, seed + i, fam), 48)
    yield Row(
        "naive: fixed-n verdict after every prompt 6–48, K = 1, false ON",
        *naive,
        "> 0.025 (shows the failure)",
        naive[0] > SIDE + 2 * naive[1],
        "",
    )
