"""One configuration for a serving pool: the time-weighted speedup across workloads, decided by
the same three-outcome sign-flip rule as one workload (docs/theory.md §8, "For a pool").

Traffic is tokens, so the pool's speedup for a setting k is a ratio of decode times, not a mean
of speedups,

    O_k = Σ_w a_w / Σ_w a_w / S_wk,     a_w = W_w · ITL_base,w

with W_w the workload's share of output tokens (its config `weight`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from specbench.analysis.decide.recommend import (
    RULE,
    SettingKey,
    cluster_pivots,
    common_prompts,
    decision_numbers,
    fmt_bound,
    need_text,
    one_sided,
    setting_name,
    setting_speedup,
)
from specbench.analysis.documents.results_model import PoolDecision
from specbench.analysis.documents.results_model_base import EstimateJSON, Verdict
from specbench.analysis.estimators.latency import Paired
from specbench.analysis.stats import signflip
from specbench.analysis.stats.serialize import json_num
from specbench.analysis.stats.signflip import RatioPivots


@dataclass(frozen=True)
class WorkloadInput:
    """What the pool-wide decision needs of one workload at one temperature."""

    workload: str
    weight: float  # share of output tokens (normalised over the pool)
    baseline_itl_ms: float
    paired: dict[SettingKey, Paired]
    own_speedup: float  # the workload's own recommendation (1 when off)


def pool_pivots(
    inputs: Sequence[WorkloadInput], keys: list[SettingKey]
) -> tuple[RatioPivots, dict[str, int]] | None:
    """The pool's speedup O_k = Σ_w W_w·ITL_base,w / Σ_w W_w·ITL_k,w as one ratio of sums over
    every workload's prompts: prompt u of workload w enters with weight W_w / (its workload's
    tokens), so the baseline ITL the weights need is measured on the same prompts and flipped
    with them — its noise is in the test (docs/theory.md §8). With the pivots, each workload's
    number of prompts. None when a workload has fewer than two prompts common to every setting."""
    total = sum(w.weight for w in inputs) or 1.0
    ys, xs, prompts = [], [], {}
    for w in inputs:
        common = common_prompts([w.paired[k] for k in keys])
        piv = cluster_pivots(common)
        if piv.n < 2:
            return None
        tokens = float(((common[0].tok_new + common[0].tok_base) / 2.0).sum())
        scale = (w.weight / total) / tokens
        ys.append(piv.y * scale)
        xs.append(piv.x * scale)
        prompts[w.workload] = piv.n
    return RatioPivots(np.concatenate(ys, axis=1), np.concatenate(xs, axis=1)), prompts


def pool_recommendation(
    temperature: float,
    inputs: Sequence[WorkloadInput],
    margin: float,
    level: float,
    n_boot: int,
) -> PoolDecision:
    """One setting (or off, or undecided) for a pool serving every workload at this temperature;
    its `on_for` / `off_for` / `not_measured` lists are the caller's (the workloads' own verdicts,
    empty here)."""
    del n_boot  # the sign-flip test needs no resamples
    alpha = 1.0 - one_sided(level)
    total = sum(w.weight for w in inputs) or 1.0
    a = {w.workload: w.weight / total * w.baseline_itl_ms for w in inputs}
    routed = sum(a.values()) / sum(a[w.workload] / w.own_speedup for w in inputs)
    keys = sorted(set.intersection(*(set(w.paired) for w in inputs)) if inputs else set())
    out = PoolDecision(
        temperature=temperature,
        workloads=[w.workload for w in inputs],
        rule=RULE + " (time-weighted pool speedup)",
        candidates=len(keys),
        false_on_rate=json_num(alpha),
        false_off_rate=json_num(alpha),
        per_workload_routing_speedup=json_num(routed),
        verdict="not_measured",
        gamma=0,
        speedup=None,
        reason="no setting measured on at least 2 prompts of every workload: not a verdict",
        on_for=[],
        off_for=[],
        not_measured=[],
    )
    pooled = pool_pivots(inputs, keys) if keys else None
    if pooled is None:
        return out
    piv, prompts = pooled
    d = signflip.decide(piv, 1.0 + margin, alpha)
    # each workload's traffic share rests on its own prompts only: the pool is no better measured
    # than its least-measured workload, so each must reach the test's resolution (§8)
    fewest = min(inputs, key=lambda w: prompts[w.workload])
    n_fewest = prompts[fewest.workload]
    if n_fewest < signflip.min_prompts(alpha) and d.outcome != "undecided":
        d = replace(d, outcome="undecided", chosen=None)
        short = (
            f"workload {fewest.workload} rests on {n_fewest} prompts, fewer than the "
            f"{signflip.min_prompts(alpha)} a verdict needs"
        )
    else:
        short = ""
    points = piv.estimates
    table = []
    for i, k in enumerate(keys):
        lo, hi = signflip.interval(RatioPivots(piv.y[i : i + 1], piv.x[i : i + 1]), level)
        speedup = EstimateJSON(value=json_num(points[i]), ci95=(json_num(lo), json_num(hi)))
        table.append(setting_speedup(k, speedup, (json_num(d.lower[i]), json_num(d.upper[i]))))
    best = int(np.nanargmax(points)) if np.isfinite(points).any() else 0
    out.critical_value = json_num(d.critical_on)
    out.settings = table
    numbers = decision_numbers(piv, d, d.chosen if d.chosen is not None else best, margin, alpha)
    for name in numbers.model_fields_set:
        setattr(out, name, getattr(numbers, name))
    if d.outcome == "on" and d.chosen is not None:
        i = d.chosen
        out.drafter, out.policy, out.gamma = keys[i]
        out.verdict = "on"
        out.speedup = table[i].speedup
        out.decision_lower_bound = json_num(d.lower[i])
        out.reason = f"pool lower bound {d.lower[i]:.3f} > 1 + margin {margin:g}"
        return out
    verdict: Verdict = "off" if d.outcome == "off" else "undecided"
    if short:
        why = f"{short}; the pool is no better measured than its least-measured workload"
    else:
        why = (
            f"every setting's pool upper bound is below 1 + margin {1 + margin:g}"
            if verdict == "off"
            else f"no single setting is shown to clear 1 + margin {margin:g} for the whole "
            f"pool, nor shown not to; " + need_text(out.prompts_needed, d.n)
        )
    out.verdict = verdict
    out.speedup = EstimateJSON(value=1.0, ci95=(1.0, 1.0))
    out.best_measured = table[best]
    out.reason = (
        f"{why} (best {setting_name(keys[best])}: {points[best]:.3f}×, bounds "
        f"[{fmt_bound(d.lower[best])}, {fmt_bound(d.upper[best])}])"
    )
    return out
