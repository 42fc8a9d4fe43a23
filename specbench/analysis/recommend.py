"""The ON/OFF decision, aware of selection: per workload and for one setting across the traffic.

Rule (docs/theory.md §8). A workload's candidates are every measured setting (drafter × policy ×
γ), each paired with the baseline on the same prompts. Simultaneous one-sided lower confidence
bounds L_k for all candidates' speedups come from the max-T bootstrap (`stats.simultaneous_lower`):
P(any true S_k < L_k) ≤ (1 − level)/2. Speculation is ON only if some L_k > 1 + margin; among the
candidates that clear it the one with the highest point speedup is recommended. Because the bounds
hold for every candidate at once, choosing the best of K and then testing it does not inflate the
error: when every true speedup is at most 1 + margin, P(ON) ≤ 2.5 % at level 0.95, whatever K
(tests/unit/test_calibration.py measures it at the boundary; the naive rule — test the point-best
at 2.5 % — gives 7–17 % with 4–12 candidates).

Across workloads (one configuration per serving pool): traffic is tokens, so the pool's speedup
for a setting k is a ratio of decode times, not a mean of speedups,

    O_k = Σ_w a_w / Σ_w a_w / S_wk,     a_w = W_w · ITL_base,w

with W_w the workload's share of output tokens (its config `weight`). Its interval and the same
max-T rule over the settings measured in every workload decide "one setting for the pool" or off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench.analysis.crossed import MIN_STARTS, crossed_replicates
from specbench.analysis.latency import Paired, pair, speedup_of
from specbench.analysis.serialize import est_json, json_num
from specbench.analysis.stats import (
    DEFAULT_SEED,
    THROUGHPUT_RATIO_COEFS,
    Estimate,
    Replicates,
    cluster_sums,
    log_linear_replicates,
    simultaneous_lower,
    symmetric_quantiles,
)

SettingKey = tuple[str, str, int]  # (drafter, policy, γ)
MIN_PROMPTS = 2


def one_sided(level: float) -> float:
    """The one-sided confidence of a two-sided `level` interval's lower end (0.95 → 0.975)."""
    return 1.0 - (1.0 - level) / 2.0


def joint_replicates(
    paired: Sequence[Paired], n_boot: int, seed: int
) -> tuple[Replicates, int] | None:
    """Replicates of every candidate's speedup over the prompts all of them measured (jointly
    resampled, repeats clustered). None when fewer than MIN_PROMPTS prompts are common."""
    common = set(paired[0].keys)
    for p in paired[1:]:
        common &= set(p.keys)
    keys = [k for k in paired[0].keys if k in common]
    clusters = [k[0] for k in keys]
    if len(set(clusters)) < MIN_PROMPTS:
        return None
    if all(p.by_start for p in paired) and len({k[1] for k in keys}) >= MIN_STARTS:
        cands = [p.restricted(keys).arrays() for p in paired]  # units: (prompt, engine start)
        starts = [k[1] for k in keys]
        return crossed_replicates(cands, clusters, starts, n_boot=n_boot, seed=seed), len(
            set(clusters)
        )
    arrays = [cluster_sums(p.restricted(keys).arrays(), clusters) for p in paired]
    return log_linear_replicates(arrays, THROUGHPUT_RATIO_COEFS, n_boot, seed), len(set(clusters))


def _value(e: Estimate | None) -> float:
    return e.value if e is not None else math.nan


def _name(key: SettingKey) -> str:
    """A setting in a sentence: "γ=4", "ngram γ=4", or an engine setting's own label."""
    drafter, policy, gamma = key
    name = drafter if "γ=" in drafter else f"{drafter} γ={gamma}"
    name = f"γ={gamma}" if drafter in ("", "model") else name
    return name if policy in ("", "fixed") else f"{name} ({policy})"


def _label(key: SettingKey) -> dict[str, Any]:
    return {"drafter": key[0], "policy": key[1], "gamma": key[2]}


@dataclass(frozen=True)
class Candidates:
    """Every measured setting of one workload × temperature, each paired with the baseline: its
    marginal speedup estimate and, when at least MIN_PROMPTS prompts are common to all, its
    simultaneous one-sided lower bound (`bounds`, in `keys` order; None otherwise)."""

    keys: list[SettingKey]
    marginal: dict[SettingKey, Estimate | None]
    bounds: dict[SettingKey, float] | None
    critical_value: float | None
    n_common: int


def candidates(
    base: list[dict[str, Any]],
    settings: dict[SettingKey, list[dict[str, Any]]],
    level: float,
    n_boot: int,
    seed: int = DEFAULT_SEED,
) -> Candidates:
    """The K candidates of the ON rule (every drafter × policy × γ, and on engine runs every
    method × γ × endpoint) with their marginal estimates and max-T simultaneous bounds."""
    paired = {k: pair(base, recs) for k, recs in settings.items()}
    paired = {k: p for k, p in paired.items() if len(p)}
    keys = list(paired)
    if not keys:
        return Candidates([], {}, None, None, 0)
    marginal = {k: speedup_of(paired[k], n_boot, level) for k in keys}
    joint = joint_replicates([paired[k] for k in keys], n_boot, seed)
    if joint is None:
        return Candidates(keys, marginal, None, None, 0)
    rep, n_common = joint
    bounds, crit = simultaneous_lower(rep, level)
    return Candidates(keys, marginal, dict(zip(keys, bounds, strict=True)), crit, n_common)


def recommend(
    base: list[dict[str, Any]],
    settings: dict[SettingKey, list[dict[str, Any]]],
    margin: float,
    level: float,
    n_boot: int,
    seed: int = DEFAULT_SEED,
) -> dict[str, Any]:
    """The selection-aware verdict for one workload × temperature (module docstring)."""
    cand = candidates(base, settings, level, n_boot, seed)
    out: dict[str, Any] = {
        "rule": "max-T simultaneous lower bound > 1 + margin",
        "candidates": len(cand.keys),
        "false_on_rate": json_num(1.0 - one_sided(level)),
        "margin": margin,
    }
    if not cand.keys:  # nothing speculative measured (a baseline-only engine run): no verdict
        return {
            **out,
            "gamma": 0,
            "verdict": "not_measured",
            "speedup": None,
            "reason": "no speculative setting was measured (only the baseline): not a verdict",
        }
    keys, marginal = cand.keys, cand.marginal
    points = {k: _value(marginal[k]) for k in keys}
    best = max(keys, key=lambda k: points[k] if math.isfinite(points[k]) else -math.inf)
    if cand.bounds is None:
        return {
            **out,
            "gamma": 0,
            "verdict": "off",
            "speedup": {"value": 1.0, "ci95": [1.0, 1.0]},
            "best_measured": {**_label(best), "speedup": est_json(marginal[best])},
            "reason": f"fewer than {MIN_PROMPTS} prompts measured by every setting: no decision",
        }
    bound_of = cand.bounds
    out.update({"n_prompts": cand.n_common, "critical_value": json_num(cand.critical_value)})
    clearing = [k for k in keys if bound_of[k] > 1.0 + margin]
    if clearing:
        chosen = max(clearing, key=lambda k: points[k])
        return {
            **out,
            **_label(chosen),
            "verdict": "on",
            "speedup": est_json(marginal[chosen]),
            "decision_lower_bound": json_num(bound_of[chosen]),
            "reason": (
                f"simultaneous lower bound {bound_of[chosen]:.3f} > 1 + margin {margin:g} "
                f"(best of {len(keys)} settings, selection accounted for)"
            ),
        }
    worst = min(keys, key=lambda k: points[k] if math.isfinite(points[k]) else math.inf)
    return {
        **out,
        "gamma": 0,
        "verdict": "off",
        "speedup": {"value": 1.0, "ci95": [1.0, 1.0]},
        "best_measured": {
            **_label(best),
            "speedup": est_json(marginal[best]),
            "decision_lower_bound": json_num(bound_of[best]),
        },
        "reason": (
            f"best setting {_name(best)} gives {points[best]:.3f}× but its simultaneous lower bound "
            f"{bound_of[best]:.3f} is not above 1 + margin {margin:g}"
        ),
        "loss_avoided": {**_label(worst), "speedup": est_json(marginal[worst])},
    }


@dataclass(frozen=True)
class WorkloadInput:
    """What the pool-wide decision needs of one workload at one temperature."""

    workload: str
    weight: float  # share of output tokens (normalised over the pool)
    baseline_itl_ms: float
    paired: dict[SettingKey, Paired]
    own_speedup: float  # the workload's own recommendation (1 when off)


def _pool_replicates(
    inputs: Sequence[WorkloadInput], keys: list[SettingKey], n_boot: int
) -> Replicates | None:
    """Replicates of log O_k (module docstring): workloads resampled independently (strata)."""
    total = sum(w.weight for w in inputs) or 1.0
    a = np.asarray([w.weight / total * w.baseline_itl_ms for w in inputs])  # (W,)
    reps = []
    for i, w in enumerate(inputs):
        joint = joint_replicates([w.paired[k] for k in keys], n_boot, DEFAULT_SEED + 7919 * (i + 1))
        if joint is None:
            return None
        reps.append(joint[0])

    def combine(logs: np.ndarray, ses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # logs, ses: (W, …, K) → log O and its delta-method se, (…, K)
        spec_time = a.reshape((-1,) + (1,) * (logs.ndim - 1)) * np.exp(-logs)
        share = spec_time / spec_time.sum(axis=0)
        log_o = math.log(a.sum()) - np.log(spec_time.sum(axis=0))
        return log_o, np.sqrt((share**2 * ses**2).sum(axis=0))

    log0, se0 = combine(np.stack([r.log_value for r in reps]), np.stack([r.se for r in reps]))
    b = min(len(r.boot_log) for r in reps)
    logb, seb = combine(
        np.stack([r.boot_log[:b] for r in reps]), np.stack([r.boot_se[:b] for r in reps])
    )
    return Replicates(log0, se0, logb, seb)


def pool_recommendation(
    temperature: float,
    inputs: Sequence[WorkloadInput],
    margin: float,
    level: float,
    n_boot: int,
) -> dict[str, Any]:
    """One setting (or off) for a pool serving every workload at this temperature."""
    total = sum(w.weight for w in inputs) or 1.0
    a = {w.workload: w.weight / total * w.baseline_itl_ms for w in inputs}
    routed = sum(a.values()) / sum(a[w.workload] / w.own_speedup for w in inputs)
    keys = sorted(set.intersection(*(set(w.paired) for w in inputs)) if inputs else set())
    out: dict[str, Any] = {
        "temperature": temperature,
        "workloads": [w.workload for w in inputs],
        "rule": "max-T simultaneous lower bound of the time-weighted pool speedup > 1 + margin",
        "candidates": len(keys),
        "false_on_rate": json_num(1.0 - one_sided(level)),
        "per_workload_routing_speedup": json_num(routed),
    }
    rep = _pool_replicates(inputs, keys, n_boot) if keys else None
    if rep is None:
        return {  # nothing to decide on: no verdict, never OFF (issue 32)
            **out,
            "verdict": "not_measured",
            "gamma": 0,
            "speedup": None,
            "reason": "no setting measured on at least 2 prompts of every workload: not a verdict",
        }
    bounds, crit = simultaneous_lower(rep, level)
    points = np.exp(rep.log_value)
    half = symmetric_quantiles(rep, level)
    with np.errstate(over="ignore", invalid="ignore"):
        ends = np.exp(rep.log_value - half * rep.se), np.exp(rep.log_value + half * rep.se)
    intervals = {
        k: [
            json_num(float(ends[0][i])),
            json_num(float(ends[1][i])),
        ]
        for i, k in enumerate(keys)
    }
    table = [
        {
            **_label(k),
            "speedup": {"value": json_num(points[i]), "ci95": intervals[k]},
            "decision_lower_bound": json_num(bounds[i]),
        }
        for i, k in enumerate(keys)
    ]
    out.update({"critical_value": json_num(crit), "settings": table})
    clearing = [i for i in range(len(keys)) if bounds[i] > 1.0 + margin]
    best = int(np.argmax(points))
    if clearing:
        i = max(clearing, key=lambda j: points[j])
        return {
            **out,
            **_label(keys[i]),
            "verdict": "on",
            "speedup": table[i]["speedup"],
            "decision_lower_bound": json_num(bounds[i]),
            "reason": f"pool lower bound {bounds[i]:.3f} > 1 + margin {margin:g}",
        }
    return {
        **out,
        "verdict": "off",
        "gamma": 0,
        "speedup": {"value": 1.0, "ci95": [1.0, 1.0]},
        "best_measured": table[best],
        "reason": (
            f"no single setting clears 1 + margin {margin:g} for the whole pool (best "
            f"{_name(keys[best])}: {points[best]:.3f}×, lower bound {bounds[best]:.3f})"
        ),
    }


def decide_entry(
    out: dict[str, Any],
    base: list[dict[str, Any]],
    settings: dict[SettingKey, list[dict[str, Any]]],
    failed: list[dict[str, Any]],
    margin: float,
    level: float,
    n_boot: int,
) -> None:
    """The workload's recommendation over every measured setting (`analysis.recommend`), or
    "not_measured" when its speculative settings produced no record but failures."""
    rec = recommend(base, settings, margin, level, n_boot)
    measured = any(recs for recs in settings.values())
    if not measured and any(f.get("gamma") for f in failed):
        rec = {
            **rec,
            "verdict": "not_measured",
            "reason": f"every speculative setting failed ({len(failed)} failed units): not a verdict",
        }
    if rec["verdict"] == "on":
        rec["itl_ms"] = {
            "baseline": (out.get("baseline_itl_ms") or {}).get("value"),
            "speculative": _itl_of(out, rec),
        }
    else:
        base_itl = (out.get("baseline_itl_ms") or {}).get("value")
        rec["itl_ms"] = {"baseline": base_itl, "speculative": base_itl}
    rec["model_optimum"] = out.get("model_optimum")
    out["recommendation"] = rec


def _itl_of(out: dict[str, Any], rec: dict[str, Any]) -> float | None:
    for m in out.get("methods") or []:
        if (m["drafter"], m["policy"], m["gamma"]) == (rec["drafter"], rec["policy"], rec["gamma"]):
            return (m.get("itl_ms") or {}).get("value")
    for row in out.get("gammas") or []:
        if row["gamma"] == rec["gamma"] and row.get("itl_ms"):
            return row["itl_ms"]["value"]
    return None
