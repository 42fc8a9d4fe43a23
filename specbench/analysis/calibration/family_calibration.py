"""The three-outcome verdict measured on the realistic family (docs/theory.md §10, §8).

Every function draws data from `analysis.calibration.traffic_family` with a known truth, runs the project's
own decision (`analysis.stats.signflip` through `recommend`'s pivots) and returns rates with their
Monte Carlo standard errors. benchmarks/bench_calibration.py prints them at ≥ 4,000 replicates
with fresh seeds; tests/unit/test_family_calibration.py asserts them at fewer, fixed seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specbench.analysis.calibration import traffic_family as tf
from specbench.analysis.stats import signflip
from specbench.analysis.stats.resampling import (
    THROUGHPUT_RATIO_COEFS,
    log_linear_replicates,
    simultaneous_lower,
)
from specbench.analysis.stats.signflip import RatioPivots, throughput_pivots

Rate = tuple[float, float]
LINE = 1.05  # 1 + the default margin
ALPHA = 0.025  # each one-sided error rate


def rate(hits: int, reps: int) -> Rate:
    p = hits / reps
    return p, math.sqrt(max(p * (1 - p), 1.0 / reps) / reps)


def gammas_for(k: int) -> tuple[int, ...]:
    return (2,) if k == 1 else tuple(range(1, k + 1))


@dataclass(frozen=True)
class Outcomes:
    on: Rate
    off: Rate
    undecided: Rate
    below: Rate  # the first setting's 95 % interval entirely below the truth (upper tail miss)
    above: Rate  # … entirely above it (lower tail miss)
    reps: int


def _pivots(tb: np.ndarray, mb: np.ndarray, ts: np.ndarray, ms: np.ndarray, r: int) -> RatioPivots:
    k = ts.shape[0]
    return throughput_pivots(
        ts[:, r],
        ms[:, r],
        np.broadcast_to(tb[r], (k, tb.shape[1])),
        np.broadcast_to(mb[r], (k, mb.shape[1])),
    )


def outcomes(
    n: int, k: int, speedup: float, reps: int, seed: int, fam: tf.Family = tf.Family()
) -> Outcomes:
    """P(ON), P(OFF), P(UNDECIDED) of K settings all at true `speedup`, and both tails of the
    first setting's printed 95 % interval."""
    rng = np.random.default_rng(seed)
    tb, mb, ts, ms = tf.draw_at(rng, reps, n, gammas_for(k), fam, speedup)
    counts = {"on": 0, "off": 0, "undecided": 0}
    below = above = 0
    for r in range(reps):
        piv = _pivots(tb, mb, ts, ms, r)
        counts[signflip.outcome(piv, LINE, ALPHA)] += 1
        lo, hi = signflip.interval(RatioPivots(piv.y[:1], piv.x[:1]), 0.95)
        below += bool(hi < speedup)
        above += bool(lo > speedup)
    return Outcomes(
        rate(counts["on"], reps), rate(counts["off"], reps), rate(counts["undecided"], reps),
        rate(below, reps), rate(above, reps), reps,
    )  # fmt: skip


def old_rule_power(
    n: int, k: int, speedup: float, reps: int, seed: int, fam: tf.Family = tf.Family()
) -> Rate:
    """P(ON) of the rule this replaced (symmetric max-T bootstrap-t bound), for the power floor."""
    rng = np.random.default_rng(seed)
    tb, mb, ts, ms = tf.draw_at(rng, reps, n, gammas_for(k), fam, speedup)
    hits = 0
    for r in range(reps):
        cands = [[ts[j, r], ms[j, r], tb[r], mb[r]] for j in range(ts.shape[0])]
        rep = log_linear_replicates(cands, THROUGHPUT_RATIO_COEFS, 1000, seed + r)
        bounds, _ = simultaneous_lower(rep, 0.95)
        hits += bool(np.nanmax(bounds) > LINE)
    return rate(hits, reps)


def pool_false_on(n: int, reps: int, seed: int, fam: tf.Family = tf.Family()) -> Rate:
    """The pool decision at its line: two workloads of equal token share, one at 1.2× and one at
    the speedup that puts the time-weighted pool at exactly 1 + margin, two settings each; the
    baseline ITLs that weight them are measured (inside the test's pivots)."""
    s1 = 1.2
    s2 = 1.0 / (2.0 / LINE - 1.0 / s1)
    rng = np.random.default_rng(seed)
    a = tf.draw_at(rng, reps, n, (1, 2), fam, s1)
    b = tf.draw_at(rng, reps, n, (1, 2), fam, s2)
    hits = 0
    for r in range(reps):
        ys, xs = [], []
        for tb, mb, ts, ms in (a, b):
            piv = _pivots(tb, mb, ts, ms, r)
            tokens = float(((ts[0, r] + tb[r]) / 2).sum())
            ys.append(piv.y * 0.5 / tokens)
            xs.append(piv.x * 0.5 / tokens)
        piv = RatioPivots(np.concatenate(ys, 1), np.concatenate(xs, 1))
        hits += signflip.outcome(piv, LINE, ALPHA) == "on"
    return rate(hits, reps)


def advice_power(
    n_pilot: int, speedup: float, reps: int, seed: int, fam: tf.Family = tf.Family()
) -> tuple[Rate, float]:
    """Follow the UNDECIDED advice: from a pilot of n_pilot prompts (one setting), take the
    prompts it says would give 80 % power, measure that many fresh prompts, decide. Returns
    P(the new run decides correctly | advice was given) and the median advised N."""
    rng = np.random.default_rng(seed)
    tb, mb, ts, ms = tf.draw_at(rng, reps, n_pilot, (2,), fam, speedup)
    hits = given = 0
    advised = []
    for r in range(reps):
        piv = _pivots(tb, mb, ts, ms, r)
        d = signflip.decide(piv, LINE, ALPHA)
        if d.outcome != "undecided":
            continue
        est = float(piv.estimates[0])
        se = signflip.se_log(piv, 0, LINE)
        need = signflip.prompts_for_power(abs(math.log(est / LINE)), se * math.sqrt(n_pilot), ALPHA)
        if need is None or need > 400:
            continue
        given += 1
        advised.append(need)
        t2 = tf.draw_at(rng, 1, need, (2,), fam, speedup)
        d2 = signflip.decide(_pivots(*t2, 0), LINE, ALPHA)
        hits += d2.outcome == ("on" if speedup > LINE else "off")
    return rate(hits, max(given, 1)), float(np.median(advised)) if advised else math.nan


STRESS_ACCEPTANCE = tf.Family(alpha_sd=0.3, kappa=2.0, length_corr=0.6)
ACCEPTANCE_GAMMA = {tf.Family(): 2, STRESS_ACCEPTANCE: 4}


@dataclass(frozen=True)
class Tails:
    """Both one-sided misses of a printed 95 % interval: entirely below the truth (its upper end
    too low) and entirely above it (its lower end too high); with the share unbounded."""

    below: Rate
    above: Rate
    unbounded: float


def acceptance_tails(
    n: int, reps: int, seed: int, fam: tf.Family = tf.Family(), gamma: int = 2
) -> dict[str, Tails]:
    """The α and τ intervals a verdict prints (`signflip.rate_estimate` / `ratio_estimate`, as
    `analysis.estimators.acceptance.estimate_alpha` calls them) on n prompts of the family at γ, against the
    population ratios of sums (`traffic_family.true_acceptance`): accepted / drafted, exact β
    over verified positions, and τ = tokens / rounds."""
    truth = tf.true_acceptance(gamma, fam)
    w = tf.draw_acceptance(np.random.default_rng(seed), reps, n, gamma, fam)
    stats = {
        "α accepted/drafted": (truth.accepted_drafted, w.accepted, w.drafted, True),
        "α exact β": (truth.exact_beta, w.beta, w.verified, True),
        "τ tokens/round": (truth.tokens_per_round, w.tokens, w.rounds, False),
    }
    out = {}
    for name, (true, num, den, is_rate) in stats.items():
        below = above = wide = 0
        for r in range(reps):
            f = signflip.rate_estimate if is_rate else signflip.ratio_estimate
            e = f(num[r], den[r], 0.95)
            below += bool(e.hi < true)
            above += bool(e.lo > true)
            wide += not (math.isfinite(e.lo) and math.isfinite(e.hi)) or (
                is_rate and (e.lo, e.hi) == (0.0, 1.0)
            )
        out[name] = Tails(rate(below, reps), rate(above, reps), wide / reps)
    return out


def run_cells(
    n: int, cells: int, reps: int, seed: int, fam: tf.Family = tf.Family()
) -> tuple[Rate, Rate]:
    """A whole run's cells together (every cell's K = 4 settings at the line): the share of cells
    ON (each verdict's own false-ON rate, claimed ≤ 2.5 %) and P(at least one cell ON) across the
    run (not claimed: at most cells × 2.5 %; docs/theory.md §8)."""
    rng = np.random.default_rng(seed)
    draws = [tf.draw_at(rng, reps, n, gammas_for(4), fam, LINE) for _ in range(cells)]
    on_cells = any_on = 0
    for r in range(reps):
        ons = [signflip.outcome(_pivots(*d, r), LINE, ALPHA) == "on" for d in draws]
        on_cells += sum(ons)
        any_on += any(ons)
    return rate(on_cells, reps * cells), rate(any_on, reps)
