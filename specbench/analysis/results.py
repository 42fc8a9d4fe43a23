"""From records.jsonl to results.json: per workload × temperature estimates, fits, the
recommendation and warnings. Pure (numpy), no models: `specbench report` calls it on stored records.

Conventions (documented in the README):
- per-token latency (ITL) is TPOT, decode time ÷ tokens after the first of each turn (THEORY §6);
  TTFT is reported apart. The measured speedup is mean decode tokens/s of speculation ÷ that of the
  baseline over the same prompts (Spec-Bench's ratio of means), with a paired prompt bootstrap;
  the end-to-end speedup (prefill included) is reported beside it.
- predictions: ITL_eff(γ) = (γ·T_d + T_t(γ) + overhead(γ)) / ā(γ), with T_t and the harness
  overhead fitted as a + b·k over rounds (k = drafted tokens) and T_d the mean draft step.
  ā(γ) comes from the iid model with the exact-β α ("iid") or from the truncation curve of the
  largest-γ run ("empirical").
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from specbench.analysis import roi
from specbench.analysis.acceptance import (
    accepted_histogram,
    all_rounds,
    estimate_alpha,
    per_position_acceptance,
    truncation_curve,
)
from specbench.analysis.stats import (
    Estimate,
    coefficient_of_variation,
    linear_fit,
    mean_ci,
    prompts_needed,
    ratio_of_means_ci,
)

RESULTS_SCHEMA = 1
CV_WARN = 0.25  # per-prompt latency spread above this is called unstable


def _est(e: Estimate | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {"value": _f(e.value), "ci95": [_f(e.lo), _f(e.hi)]}


def _f(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), 6)


def _decode_tps(rec: dict[str, Any]) -> float | None:
    tpot = rec.get("tpot_ms")
    return 1000.0 / tpot if tpot else None


def _paired(
    base: list[dict[str, Any]], spec: list[dict[str, Any]], field: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per-prompt values of the same (prompt, repeat) on both sides."""
    by_key = {(r["prompt_id"], r["repeat"]): r for r in base}
    top, bottom = [], []
    for r in spec:
        b = by_key.get((r["prompt_id"], r["repeat"]))
        if b is None:
            continue
        tv = _decode_tps(r) if field == "decode_tps" else r.get(field)
        bv = _decode_tps(b) if field == "decode_tps" else b.get(field)
        if tv is not None and bv is not None:
            top.append(tv)
            bottom.append(bv)
    return np.asarray(top, float), np.asarray(bottom, float)


def measured_latency(
    base: list[dict[str, Any]], recs: list[dict[str, Any]], n_boot: int, level: float
) -> dict[str, Any]:
    """ITL, decode tokens/s and the speedups (decode and end to end, paired by prompt) of a
    setting's records against the baseline's — shared by every backend's analysis."""
    top, bottom = _paired(base, recs, "decode_tps")
    e2e_top, e2e_bottom = _paired(base, recs, "tokens_per_s")
    return {
        "itl_ms": _est(
            mean_ci(np.asarray([r["tpot_ms"] for r in recs if r.get("tpot_ms")]), n_boot, level)
        ),
        "tokens_per_s": _est(
            mean_ci(np.asarray([_decode_tps(r) for r in recs if _decode_tps(r)]), n_boot, level)
        ),
        "measured_speedup": _est(ratio_of_means_ci(top, bottom, n_boot, level))
        if len(top)
        else None,
        "measured_e2e_speedup": _est(ratio_of_means_ci(e2e_top, e2e_bottom, n_boot, level))
        if len(e2e_top)
        else None,
    }


def analyse_group(
    base: list[dict[str, Any]],
    specs: dict[int, list[dict[str, Any]]],
    margin: float,
    n_boot: int,
    level: float,
    target_halfwidth: float,
) -> dict[str, Any]:
    """Everything for one workload × temperature."""
    warnings: list[str] = []
    out: dict[str, Any] = {"n_prompts": len({r["prompt_id"] for r in base} or {0}) if base else 0}

    # --- baseline ---
    base_itl = mean_ci(np.asarray([r["tpot_ms"] for r in base if r.get("tpot_ms")]), n_boot, level)
    step_means = np.asarray([np.mean(r["step_ms"]) for r in base if r.get("step_ms")])
    t_ar = (
        float(np.mean(np.concatenate([r["step_ms"] for r in base if r.get("step_ms")])))
        if len(step_means)
        else math.nan
    )
    cv_base = coefficient_of_variation(step_means)
    if math.isfinite(cv_base) and cv_base > CV_WARN:
        warnings.append(
            f"unstable timing: baseline per-token latency varies {cv_base:.0%} across prompts "
            "(CV); close other work on the machine or raise repeats"
        )
    out["baseline_itl_ms"] = _est(base_itl)
    out["baseline_step_ms"] = _f(t_ar)
    out["ttft_ms"] = _est(mean_ci(np.asarray([r["ttft_ms"][0] for r in base]), n_boot, level))
    out["baseline_tokens_per_s"] = _est(
        mean_ci(np.asarray([_decode_tps(r) for r in base if _decode_tps(r)]), n_boot, level)
    )
    out["baseline_peak_memory_mb"] = _f(max((r["peak_memory_mb"] for r in base), default=math.nan))

    # --- timing model from every speculative round ---
    all_spec = [r for rs in specs.values() for r in rs]
    draft_steps = np.asarray([t for r in all_spec for ts in r["rounds"]["draft_ms"] for t in ts])
    ks = np.asarray([k for r in all_spec for k in r["rounds"]["drafted"]], float)
    verify = np.asarray([v for r in all_spec for v in r["rounds"]["verify_ms"]])
    overhead = np.asarray([o for r in all_spec for o in r["rounds"]["overhead_ms"]])
    t_d = float(draft_steps.mean()) if len(draft_steps) else math.nan
    t0, t1, resid = linear_fit(ks, verify) if len(ks) else (math.nan, math.nan, np.asarray([]))
    o0, o1, _ = linear_fit(ks, overhead) if len(ks) else (math.nan, math.nan, None)
    residual_by_k = (
        {int(k): _f(float(resid[ks == k].mean())) for k in np.unique(ks)} if len(ks) else {}
    )
    per_prompt_draft = np.asarray(
        [
            np.mean([t for ts in r["rounds"]["draft_ms"] for t in ts])
            for r in all_spec
            if any(r["rounds"]["draft_ms"])
        ]
    )
    cv_draft = coefficient_of_variation(per_prompt_draft)
    if math.isfinite(cv_draft) and cv_draft > CV_WARN:
        warnings.append(
            f"unstable timing: the mean draft step varies {cv_draft:.0%} across prompts (CV); "
            "close other work on the machine or raise repeats"
        )
    out["timing"] = {
        "t_draft_ms": {
            "mean": _f(t_d),
            "median": _f(float(np.median(draft_steps))) if len(draft_steps) else None,
            "p10": _f(float(np.percentile(draft_steps, 10))) if len(draft_steps) else None,
            "p90": _f(float(np.percentile(draft_steps, 90))) if len(draft_steps) else None,
        },
        "verify_fit": {
            "t0_ms": _f(t0),
            "t1_ms_per_token": _f(t1),
            "mean_residual_ms_by_drafted": residual_by_k,
        },
        "overhead_fit": {"o0_ms": _f(o0), "o1_ms_per_token": _f(o1)},
        "cost_ratio": _f(t_d / t_ar) if t_ar else None,
    }

    # --- acceptance (primary: exact β at the largest γ, the most positions) ---
    gammas = sorted(specs)
    gamma_max = gammas[-1] if gammas else 0
    alpha_primary = None
    acc_max, dra_max = all_rounds(specs[gamma_max]) if gammas else (np.asarray([]), np.asarray([]))
    if gammas:
        pooled = estimate_alpha(all_spec, gamma_max, n_boot, level)
        at_max = estimate_alpha(specs[gamma_max], gamma_max, n_boot, level)
        alpha_primary = pooled.exact_beta
        out["alpha"] = {**_est(alpha_primary), "estimator": "exact_beta"}  # type: ignore[dict-item]
        out["alpha_estimators"] = {
            "exact_beta": _est(pooled.exact_beta),
            "accepted_tested": _est(pooled.accepted_tested),
            "accepted_proposed": _est(at_max.accepted_proposed),
            "from_accepted_length": _est(at_max.from_accepted_length),
            "at_gamma": gamma_max,
        }
        out["per_position_acceptance"] = per_position_acceptance(acc_max, dra_max, gamma_max)
        out["accepted_histogram"] = accepted_histogram(acc_max, gamma_max)
        if at_max.accepted_proposed.value < 0.4:
            warnings.append(
                f"accepted/proposed is {at_max.accepted_proposed.value:.2f} at γ={gamma_max} (< 0.4): "
                "speculation often costs latency at such rates"
            )
        if alpha_primary.halfwidth > target_halfwidth:
            need = prompts_needed(out["n_prompts"], alpha_primary.halfwidth, target_halfwidth)
            warnings.append(
                f"too few prompts: α CI half-width {alpha_primary.halfwidth:.3f} > "
                f"{target_halfwidth}; about {need} prompts would reach it"
            )
    else:
        out["alpha"] = None

    empirical = truncation_curve(acc_max, dra_max, gamma_max) if gammas else {}
    alpha_v = alpha_primary.value if alpha_primary is not None else math.nan

    def predict(g: int, expected: float) -> float | None:
        if not (math.isfinite(expected) and math.isfinite(t_ar) and math.isfinite(t_d)):
            return None
        round_time = g * t_d + (t0 + t1 * g) + (o0 + o1 * g)
        return t_ar / (round_time / expected)

    rows = []
    errors: dict[str, list[float]] = {"iid": [], "empirical": []}
    for g in range(1, max(gamma_max, 1) + 1):
        if not gammas:
            break
        iid_tokens = (
            roi.expected_tokens(g, min(max(alpha_v, 0.0), 1.0))
            if math.isfinite(alpha_v)
            else math.nan
        )
        emp_tokens = empirical.get(g, math.nan)
        row: dict[str, Any] = {
            "gamma": g,
            "measured": g in specs,
            "predicted_tokens_per_round": {"iid": _f(iid_tokens), "empirical": _f(emp_tokens)},
            "predicted_speedup": {
                "iid": _f(predict(g, iid_tokens) or math.nan),
                "empirical": _f(predict(g, emp_tokens) or math.nan),
            },
            "measured_speedup": None,
        }
        if g in specs:
            recs = specs[g]
            est = estimate_alpha(recs, g, n_boot, level)
            verify_g = [
                v
                for r in recs
                for v, k in zip(r["rounds"]["verify_ms"], r["rounds"]["drafted"], strict=True)
                if k == g
            ]
            row.update(
                {
                    "alpha_exact_beta": _est(est.exact_beta),
                    "accepted_proposed": _est(est.accepted_proposed),
                    "mean_tokens_per_round": _est(est.tokens_per_round),
                    "t_verify_ms_median": _f(float(np.median(verify_g))) if verify_g else None,
                    **measured_latency(base, recs, n_boot, level),
                    "peak_memory_mb": _f(
                        max((r["peak_memory_mb"] for r in recs), default=math.nan)
                    ),
                }
            )
            if est.tokens_per_round.value < 1.5:
                warnings.append(
                    f"γ={g}: mean tokens per round {est.tokens_per_round.value:.2f} < 1.5"
                )
            measured = (row["measured_speedup"] or {}).get("value")
            add_prediction_errors(errors, row, measured)
        rows.append(row)
    conclude(out, rows, errors, margin)
    out["warnings"] = warnings
    return out


def add_prediction_errors(
    errors: dict[str, list[float]], row: dict[str, Any], measured: float | None
) -> None:
    """Append each model's relative error (predicted / measured − 1) for one measured γ row."""
    if not measured:
        return
    for model in ("iid", "empirical"):
        pred = row["predicted_speedup"][model]
        if pred is not None:
            errors[model].append((pred - measured) / measured)


def conclude(
    out: dict[str, Any], rows: list[dict[str, Any]], errors: dict[str, list[float]], margin: float
) -> None:
    """Store the γ rows, each model's prediction error, and the recommendation (made with the
    better-validated model) into a group's results — shared by every backend's analysis."""
    out["gammas"] = rows
    out["prediction_error"] = {
        m: {"mean_abs_rel": _f(float(np.mean(np.abs(v)))) if v else None, "n": len(v)}
        for m, v in errors.items()
    }
    better = min(
        ("iid", "empirical"),
        key=lambda m: (
            out["prediction_error"][m]["mean_abs_rel"]
            if out["prediction_error"][m]["mean_abs_rel"] is not None
            else math.inf
        ),
    )
    out["recommendation"] = recommend(rows, out["baseline_itl_ms"], margin, better)


def recommend(
    rows: list[dict[str, Any]], baseline_itl: dict[str, Any] | None, margin: float, model: str
) -> dict[str, Any]:
    """THEORY §4: ON only if the low end of the speedup CI at the chosen γ exceeds 1 + margin.

    The γ is the measured one with the highest speedup; the better-validated model's optimum over
    unmeasured γ is reported beside it as a suggestion to measure.
    """
    measured = [
        r for r in rows if r.get("measured_speedup") and r["measured_speedup"]["value"] is not None
    ]
    predicted = [r for r in rows if r["predicted_speedup"][model] is not None]
    model_best = max(predicted, key=lambda r: r["predicted_speedup"][model], default=None)
    suggestion = (
        {
            "gamma": model_best["gamma"],
            "predicted_speedup": model_best["predicted_speedup"][model],
            "model": model,
        }
        if model_best is not None
        else None
    )
    if not measured:
        return {
            "gamma": 0,
            "verdict": "off",
            "speedup": None,
            "reason": "no measured γ",
            "model_optimum": suggestion,
        }
    best = max(measured, key=lambda r: r["measured_speedup"]["value"])
    sp = best["measured_speedup"]
    lo = sp["ci95"][0]
    base_itl = baseline_itl["value"] if baseline_itl else None
    spec_itl = best["itl_ms"]["value"] if best.get("itl_ms") else None
    if lo is not None and lo > 1.0 + margin:
        return {
            "gamma": best["gamma"],
            "verdict": "on",
            "speedup": sp,
            "itl_ms": {"baseline": base_itl, "speculative": spec_itl},
            "reason": f"speedup CI low end {lo:.3f} > 1 + margin {margin}",
            "model_optimum": suggestion,
        }
    worst = min(measured, key=lambda r: r["measured_speedup"]["value"])
    return {
        "gamma": 0,
        "verdict": "off",
        "speedup": {"value": 1.0, "ci95": [1.0, 1.0]},
        "best_measured": {"gamma": best["gamma"], "speedup": sp},
        "itl_ms": {"baseline": base_itl, "speculative": base_itl},
        "reason": (
            f"best γ={best['gamma']} gives {sp['value']:.3f}× (CI low {lo if lo is not None else float('nan'):.3f}), "
            f"not above 1 + margin {margin}"
        ),
        "loss_avoided": {"gamma": worst["gamma"], "speedup": worst["measured_speedup"]},
        "model_optimum": suggestion,
    }


def rank_methods(
    base: list[dict[str, Any]],
    specs: dict[tuple[str, str, int], list[dict[str, Any]]],
    n_boot: int,
    level: float,
) -> list[dict[str, Any]]:
    """Every measured drafter × policy × γ with its speedup (paired with the baseline), best first."""
    rows = []
    for (drafter, policy, gamma), recs in specs.items():
        est = estimate_alpha(recs, gamma, n_boot, level)
        latency = measured_latency(base, recs, n_boot, level)
        used = [g for r in recs for g in r["rounds"]["gamma"]]
        fallback = sum(d == 0 for r in recs for d in r["rounds"]["drafted"])
        rows.append(
            {
                "drafter": drafter,
                "policy": policy,
                "gamma": gamma,
                "mean_gamma_used": _f(float(np.mean(used))) if used else None,
                "fallback_rounds": fallback,
                "mean_tokens_per_round": _est(est.tokens_per_round),
                "accepted_proposed": _est(est.accepted_proposed),
                "itl_ms": latency["itl_ms"],
                "measured_speedup": latency["measured_speedup"],
            }
        )
    rows.sort(key=lambda r: -((r["measured_speedup"] or {}).get("value") or 0.0))
    return rows


def best_method(
    methods: list[dict[str, Any]], fixed_rec: dict[str, Any], margin: float
) -> dict[str, Any]:
    """The recommendation over every measured drafter × policy × γ (same ON rule as `recommend`)."""
    best = methods[0]
    sp = best["measured_speedup"]
    if sp is None or sp["ci95"][0] is None or sp["ci95"][0] <= 1.0 + margin:
        return {
            **fixed_rec,
            "best_measured_method": {k: best[k] for k in ("drafter", "policy", "gamma")},
        }
    base_itl = (fixed_rec.get("itl_ms") or {}).get("baseline")
    return {
        "gamma": best["gamma"],
        "drafter": best["drafter"],
        "policy": best["policy"],
        "verdict": "on",
        "speedup": sp,
        "itl_ms": {"baseline": base_itl, "speculative": (best["itl_ms"] or {}).get("value")},
        "reason": f"best of {len(methods)} measured drafter × policy × γ settings; speedup CI low end "
        f"{sp['ci95'][0]:.3f} > 1 + margin {margin}",
        "fixed_gamma_recommendation": fixed_rec,
    }


def group_records(records: list[dict[str, Any]]) -> dict[tuple[str, float], dict[str, Any]]:
    """{(workload, temperature): {"baseline": [...], "spec": {(drafter, policy, γ): [...]},
    "failed": [...]}}."""
    groups: dict[tuple[str, float], dict[str, Any]] = defaultdict(
        lambda: {"baseline": [], "spec": defaultdict(list), "failed": []}
    )
    for rec in records:
        key = (rec["workload"], float(rec["temperature"]))
        if rec["kind"] == "baseline":
            groups[key]["baseline"].append(rec)
        elif rec["kind"] == "spec":
            setting = (rec.get("drafter", ""), rec.get("policy") or "fixed", int(rec["gamma"]))
            groups[key]["spec"][setting].append(rec)
        elif rec["kind"] == "failed":
            groups[key]["failed"].append(rec)
    return groups


def build_results(
    records: list[dict[str, Any]], config: dict[str, Any], env: dict[str, Any]
) -> dict[str, Any]:
    """The results.json document (schema RESULTS_SCHEMA)."""
    decision = config.get("decision", {})
    margin = float(decision.get("margin", 0.05))
    level = float(decision.get("ci_level", 0.95))
    n_boot = int(decision.get("bootstrap", 2000))
    halfwidth = float(decision.get("target_ci_halfwidth", 0.05))
    weights = {w["name"]: float(w.get("weight", 1.0)) for w in config.get("workloads", [])}
    order = {w["name"]: i for i, w in enumerate(config.get("workloads", []))}
    entries = []
    failures: list[dict[str, Any]] = []
    for (workload, temp), grp in sorted(
        group_records(records).items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])
    ):
        failures.extend(
            {
                "workload": f["workload"],
                "temperature": f["temperature"],
                "gamma": f["gamma"],
                "prompt_id": f["prompt_id"],
                "error": f.get("error"),
            }
            for f in grp["failed"]
        )
        if any("concurrency" in r for rs in [grp["baseline"], *grp["spec"].values()] for r in rs):
            # vllm / openai backends: spec-decode counters instead of per-round data
            from specbench.analysis.engine_results import analyse_engine_group, group_metrics

            by_gamma = {g: recs for (_, _, g), recs in grp["spec"].items()}
            metrics = group_metrics(records).get((workload, temp), [])
            body = analyse_engine_group(
                grp["baseline"], by_gamma, metrics, margin, n_boot, level, halfwidth
            )
            weight = weights.get(workload, 1.0)
            entries.append({"workload": workload, "temperature": temp, "weight": weight, **body})
            continue
        if not grp["baseline"]:
            continue
        primary_label = config.get("draft", {}).get("name") or config.get("draft", {}).get(
            "method", "model"
        )
        primary = {
            g: recs
            for (d, p, g), recs in grp["spec"].items()
            if d == primary_label and p == "fixed"
        }
        body = analyse_group(grp["baseline"], primary, margin, n_boot, level, halfwidth)
        rec = body["recommendation"]
        rec.update({"drafter": primary_label, "policy": "fixed"})
        methods = rank_methods(grp["baseline"], dict(grp["spec"]), n_boot, level)
        body["methods"] = methods
        if len(methods) > len(primary):
            body["recommendation"] = best_method(methods, rec, margin)
        entries.append(
            {
                "workload": workload,
                "temperature": temp,
                "weight": weights.get(workload, 1.0),
                **body,
            }
        )
    return {
        "schema": RESULTS_SCHEMA,
        "run": {
            "name": config.get("name"),
            "target": config.get("target", {}).get("model"),
            "draft": config.get("draft", {}).get("model") or config.get("draft", {}).get("method"),
            "drafter": config.get("draft", {}).get("method", "model"),
            "sampling": config.get("sampling"),
            "gammas": config.get("gammas"),
            "max_new_tokens": config.get("max_new_tokens"),
            "backend": config.get("backend", "transformers"),
            "concurrency": config.get("concurrency"),
            "margin": margin,
            "ci_level": level,
        },
        "env": env,
        "workloads": entries,
        "global": global_recommendation(entries),
        "failures": failures,
    }


def global_recommendation(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Per temperature: the single γ maximising the traffic-weighted mean measured speedup, and
    the weighted speedup of following each workload's own recommendation."""
    out = []
    for temp in sorted({e["temperature"] for e in entries}):
        group = [e for e in entries if e["temperature"] == temp]
        total = sum(e["weight"] for e in group) or 1.0
        per_gamma: dict[int, float] = defaultdict(float)
        complete: dict[int, int] = defaultdict(int)
        for e in group:
            for row in e["gammas"]:
                ms = row.get("measured_speedup")
                if ms and ms["value"] is not None:
                    per_gamma[row["gamma"]] += e["weight"] / total * ms["value"]
                    complete[row["gamma"]] += 1
        candidates = {g: v for g, v in per_gamma.items() if complete[g] == len(group)}
        best_g = max(candidates, key=lambda g: candidates[g], default=0)
        best_v = candidates.get(best_g, 1.0)
        own = sum(
            e["weight"] / total * ((e["recommendation"]["speedup"] or {}).get("value") or 1.0)
            for e in group
        )
        out.append(
            {
                "temperature": temp,
                "single_gamma": best_g if best_v > 1.0 else 0,
                "single_gamma_weighted_speedup": _f(max(best_v, 1.0)),
                "per_workload_weighted_speedup": _f(own),
                "on_for": [e["workload"] for e in group if e["recommendation"]["verdict"] == "on"],
                "off_for": [
                    e["workload"] for e in group if e["recommendation"]["verdict"] == "off"
                ],
            }
        )
    return {"by_temperature": out}
