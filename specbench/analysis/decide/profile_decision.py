"""The decision at the deployment profile: one engine configuration for a server that carries the
profile's traffic mix at the profile's load under its SLO (docs/theory.md §22).

Each measured setting (OFF, and every candidate: methods × γ × γ schedules) ran the same
steady-state mix at each of the profile's load points, once per *block* (a repeat; with
`engine.interleave` each block opens OFF and every candidate afresh, in alternating order, so a
drift of the machine falls on all of them alike). Requests interact through batching, and every
request of a run shares its engine start, so the unit of the test is the block: per block, each
setting's objective over its steady window, weighted across load points by their shares of time.

The objective is a rate: SLO goodput (requests per second that met every per-request limit,
vLLM's benchmark's meaning) or, for `objective: cost_per_mtok`, good output tokens per second (the
server's price over it is the cost per token within the SLO). A candidate's gain over OFF is a
ratio of sums over blocks, θ_k = Σ_b y_kb / Σ_b x_b, decided by the three-outcome rule of §8 with
Student's t on B − 1 degrees of freedom in place of the sign flips (`analysis.stats.block_t`:
max-T over the candidates, so choosing the best is covered), its false ON / false OFF rates and
power measured on the seeded server of `analysis.calibration.serving_queue`.

With a price (the profile's $/GPU-hour and GPUs per server), OFF's and each candidate's cost per
10⁶ good output tokens at the profile is price × GPUs / (good tokens/s × 3600) × 10⁶, its interval
from the same blocks: the cost is a constant over the mean of the blocks' good-token rates, a
ratio of sums Σ_b c / Σ_b r_b inverted with Student's t on B − 1 degrees of freedom like the gains
(`block_t.interval`; no interval below two blocks; `profile_cost.py`).

What the decision is taken on — the runs, the SLO, the per-block objective, and the doubt that
buffered streams leave — is `profile_runs.py`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from specbench.analysis.arithmetic import roi
from specbench.analysis.decide.profile_cost import Cost, ServerPrice, block_cost
from specbench.analysis.decide.profile_runs import (
    COST,
    OFF,
    LoadRun,
    SloTargets,
    block_rates,
    buffered_doubt,
    buffered_note,
)
from specbench.analysis.documents.results_model_base import Verdict
from specbench.analysis.stats import block_t
from specbench.analysis.stats.signflip import RatioPivots
from specbench.config.profile import Objective


@dataclass(frozen=True)
class Attainment:
    """Whether a setting met the profile's percentile targets at one load point (point
    estimates over its blocks: a filter on eligibility, not a test — §22)."""

    load: str
    shares: dict[str, float]  # metric → share of requests within its limit
    met: bool


@dataclass(frozen=True)
class Candidate:
    setting: str
    gamma: int
    drafter: str
    schedule: tuple[tuple[int, int, int], ...] | None
    gain: float  # θ̂_k: the candidate's objective over OFF's
    ci95: tuple[float, float]  # its marginal 95 % interval (NaN: unbounded)
    lower: float  # simultaneous lower bound of the ON test (NaN: unbounded)
    upper: float  # upper bound of its OFF test (NaN: unbounded)
    rate: float  # its objective, time-share weighted over the load points (per s)
    attainment: tuple[Attainment, ...]
    eligible: bool  # met every percentile target at every load point
    break_even_alpha: float | None = None
    cost: Cost | None = None  # with a price: $ per 10⁶ good output tokens


@dataclass(frozen=True)
class ProfileVerdict:
    verdict: Verdict
    chosen: str | None  # the configuration to deploy when ON
    objective: Objective
    margin: float
    false_on_rate: float
    false_off_rate: float
    off_rate: float  # OFF's objective (per s), time-share weighted
    off_attainment: tuple[Attainment, ...]
    candidates: tuple[Candidate, ...]
    loads: dict[str, float]  # load point → share of time
    blocks: int
    critical_value: float
    blocks_needed: int | None
    interleaved: bool
    reason: str
    price: ServerPrice | None = None
    off_cost: Cost | None = None


def attainment(runs: Sequence[LoadRun], slo: SloTargets) -> tuple[Attainment, ...]:
    """Per load point, the share of requests within each limit that has a percentile target."""
    out = []
    for load in sorted({r.load for r in runs}):
        reqs = [q for r in runs if r.load == load for q in r.requests]
        shares: dict[str, float] = {}
        for metric in slo.percentiles:
            limit = getattr(slo.limits, metric)
            # a buffered stream's TPOT was not measured: not shown within its limit
            within = [
                q.ok
                and not (q.buffered and metric == "tpot_ms")
                and (getattr(q, metric) or 0.0) <= limit
                for q in reqs
            ]
            shares[metric] = float(np.mean(within)) if within else math.nan
        met = all(shares[m] >= slo.percentiles[m] / 100.0 for m in shares)
        out.append(Attainment(load, shares, met))
    return tuple(out)


def break_even_alpha(gamma: int, alpha_measured: float, tpot_ratio: float) -> float | None:
    """The acceptance at which a candidate's time per output token at this load equals OFF's:
    its round costs c = (TPOT_k / TPOT_off)·ā(γ, α_measured) target steps, and it pays from
    ā(γ, α*) = c (§22). None where no α reaches it (c > γ + 1) or nothing was measured."""
    if gamma < 1 or not (0.0 <= alpha_measured <= 1.0) or not tpot_ratio > 0:
        return None
    return roi.break_even_at_cost(gamma, tpot_ratio * roi.expected_tokens(gamma, alpha_measured))


def decide_at_profile(
    runs: Sequence[LoadRun],
    slo: SloTargets,
    load_shares: Mapping[str, float],
    objective: Objective = "slo_goodput",
    margin: float = 0.05,
    level: float = 0.95,
    interleaved: bool = True,
    acceptance: Mapping[str, float] | None = None,
    price: ServerPrice | None = None,
) -> ProfileVerdict:
    """ON (deploy the chosen setting), OFF (serve without speculation) or UNDECIDED for the
    profile: the three-outcome rule at 1 + margin on the candidates' gains over OFF (module
    docstring). Only candidates that met the profile's percentile targets can be chosen; all of
    them count in the max-T critical value, so the filter only makes ON rarer. With `price`,
    OFF's and each candidate's cost per 10⁶ good output tokens (module docstring)."""
    alpha = (1.0 - level) / 2.0
    total = sum(load_shares.values()) or 1.0
    shares = {k: v / total for k, v in load_shares.items() if v > 0}
    names = sorted({r.setting for r in runs if r.setting != OFF})
    gammas = {r.setting: r.gamma for r in runs}
    first = {r.setting: r for r in reversed(runs)}
    base = replace(_empty(objective, margin, alpha, shares, interleaved), price=price)
    if OFF not in gammas or not names:
        what = "OFF" if OFF not in gammas else "no speculative setting"
        return _with(base, reason=f"{what} was not measured at the profile's load: not a verdict")
    measured = block_rates(runs, names, slo, objective, shares)
    if measured is None:
        return _with(
            base, reason="no block ran every load point of the profile for OFF and every setting"
        )
    y, x = measured
    blocks = y.shape[1]
    if not x.sum() > 0:
        return _with(
            base, blocks=blocks, off_rate=0.0,
            reason="OFF met the SLO for no request at the profile's load: a gain over it is "
            "unbounded and the ratio test has nothing to divide by (relax the SLO or measure a "
            "lower load)",
        )  # fmt: skip
    piv = RatioPivots(y, np.broadcast_to(x, y.shape).copy())
    d = block_t.decide(piv, 1.0 + margin, alpha)
    acc = acceptance or {}
    costs = _costs(runs, names, slo, shares, price, level) if price is not None else None
    off_runs = [r for r in runs if r.setting == OFF]
    off_tpot = _mean_tpot(off_runs)
    cands = []
    for k, s in enumerate(names):
        own = [r for r in runs if r.setting == s]
        att = attainment(own, slo)
        lo, hi = block_t.interval(piv, k, level)
        ratio = _mean_tpot(own) / off_tpot if off_tpot > 0 else math.nan
        be = break_even_alpha(gammas[s], acc[s], ratio) if s in acc else None
        cands.append(
            Candidate(
                s, gammas[s], first[s].drafter, first[s].schedule, float(piv.estimates[k]),
                (lo, hi), float(d.lower[k]),
                float(d.upper[k]), float(y[k].mean()), att, all(a.met for a in att), be,
                costs[0][k] if costs else None,
            )
        )  # fmt: skip
    off_rate = float(x.mean())
    # the ON test per candidate (t at the line against the max-T critical value: the same
    # statement as "lower bound > 1 + margin", and defined where every block has the same ratio)
    clears = [
        k
        for k in range(len(names))
        if piv.t_at(k, 1.0 + margin) >= d.critical_on and cands[k].eligible
    ]
    best = max(range(len(names)), key=lambda k: cands[k].gain)
    out = _with(
        base,
        candidates=tuple(cands),
        off_rate=off_rate,
        off_attainment=attainment(off_runs, slo),
        off_cost=costs[1] if costs else None,
        blocks=blocks,
        critical_value=float(d.critical_on),
    )
    line = 1.0 + margin
    k = max(clears, key=lambda i: cands[i].gain) if clears else best  # ON's choice
    if d.outcome == "off" or (d.outcome == "on" and clears):
        doubt = buffered_doubt(runs, names, slo, objective, shares, line, alpha, d.outcome, k)
        if doubt is not None:
            return _with(out, verdict="undecided", reason=doubt)
    if d.outcome == "on" and clears:
        return _with(
            out, verdict="on", chosen=names[k],
            reason=f"{names[k]}: lower bound {d.lower[k]:.3f} > 1 + margin {margin:g} at the "
            f"profile's load, within its SLO",
        )  # fmt: skip
    hidden = buffered_note(runs, slo, shares)
    if d.outcome == "on":  # cleared the line but missed a percentile target
        return _with(
            out, verdict="undecided",
            reason="the settings that clear 1 + margin miss a percentile target of the SLO"
            + hidden,
        )  # fmt: skip
    if d.outcome == "off":
        return _with(
            out, verdict="off",
            reason=f"every setting's upper bound is below 1 + margin {line:g}: serve without "
            "speculation at this profile",
        )  # fmt: skip
    more = block_t.blocks_for_power(piv, best, line, alpha)
    more = None if more is None else max(more, blocks + 1)
    where = (
        f"needs about {more} blocks (repeats) in all for 80 % power"
        if more is not None
        else "not settled within 1,000 blocks at the measured gain"
    )
    return _with(
        out, verdict="undecided", blocks_needed=more,
        reason=f"no setting is shown to clear 1 + margin {margin:g} nor shown not to "
        f"({blocks} blocks; best {names[best]}: {cands[best].gain:.3f}×); {where}{hidden}",
    )  # fmt: skip


def _costs(
    runs: Sequence[LoadRun], names: list[str], slo: SloTargets, shares: Mapping[str, float],
    price: ServerPrice, level: float,
) -> tuple[list[Cost], Cost] | None:  # fmt: skip
    """Each candidate's and OFF's cost from their blocks' good output tokens/s (the blocks the
    decision used: the same `block_rates`, counting tokens whatever the objective)."""
    tokens = block_rates(runs, names, slo, COST, shares)
    if tokens is None:
        return None
    y, x = tokens
    return [block_cost(price, y[k], level) for k in range(len(names))], block_cost(price, x, level)


def _mean_tpot(runs: Sequence[LoadRun]) -> float:
    vals = [
        q.tpot_ms
        for r in runs
        for q in r.requests
        if q.ok and q.tpot_ms is not None and not q.buffered  # a buffered TPOT: not measured
    ]
    return float(np.mean(vals)) if vals else math.nan


def _empty(
    objective: Objective, margin: float, alpha: float, shares: dict[str, float], interleaved: bool
) -> ProfileVerdict:
    return ProfileVerdict(
        verdict="not_measured", chosen=None, objective=objective, margin=margin,
        false_on_rate=alpha, false_off_rate=alpha, off_rate=math.nan, off_attainment=(),
        candidates=(), loads=shares, blocks=0, critical_value=math.inf,
        blocks_needed=None, interleaved=interleaved, reason="",
    )  # fmt: skip


def _with(v: ProfileVerdict, **changes: object) -> ProfileVerdict:
    return replace(v, **changes)  # type: ignore[arg-type]
