"""From records.jsonl to results.json: per workload × temperature estimates, fits, the
recommendation and warnings. Pure (numpy / scipy), no models: `specbench report` calls it on stored
records.

Conventions (docs/theory.md; the README's results.json section):
- per-token latency (ITL) is decode time ÷ decode tokens (TPOT), TTFT apart; a setting's speedup
  is its pooled decode throughput over the baseline's on the same prompts (`analysis.latency`);
- predictions: ITL_eff(γ) = round(γ) / ā(γ) with the round cost from the one timing fit
  (`analysis.timing_model`) and ā(γ) per prompt, pooled by tokens (docs/theory.md §3): from the
  truncation of the largest-γ run ("empirical") or the iid model at each prompt's own α ("iid");
- the verdict: `analysis.recommend` (selection-aware, docs/theory.md §8);
- intervals resample prompts, repeats of a prompt as one cluster (`analysis.stats`).

Schema history: 1 — first version; 2 — speedups are pooled-throughput ratios, predictions pool
ā per prompt, the recommendation carries its simultaneous lower bound and the pool-wide
recommendation aggregates decode time; a workload whose speculative settings all failed is
"not_measured". Additive since: `content` (degenerate answers, α and speedup over the
non-degenerate prompts), `per_prompt_alpha`, `per_position_detail` (docs/theory.md §13); latency
tails (`baseline_tails`, `tails` per measured γ and per engine concurrency cell) and `economics`
(`analysis.serving_cost`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from specbench import defaults
from specbench.analysis.acceptance import (
    accepted_histogram,
    all_rounds,
    estimate_alpha,
    iid_curve,
    per_position_acceptance,
    truncation_curve,
)
from specbench.analysis.acceptance_detail import add_acceptance_detail
from specbench.analysis.latency import measured_latency, pair, pooled_itl, tokens_per_s
from specbench.analysis.predictions import add_prediction_errors, store_gamma_rows
from specbench.analysis.recommend import (
    SettingKey,
    WorkloadInput,
    decide_entry,
    pool_recommendation,
)
from specbench.analysis.serialize import est_json, json_num
from specbench.analysis.serving_cost import add_tails, economics_section, with_memory
from specbench.analysis.serving_results import engine_entry, group_metrics
from specbench.analysis.stats import coefficient_of_variation, mean_ci, prompts_needed
from specbench.analysis.timing_model import fit_from_records
from specbench.analysis.validity import (
    assess,
    compare_clean,
    degenerate_only,
    engine_validity,
    restrict_verdict,
)
from specbench.records import unresolved_failures

RESULTS_SCHEMA = 2
CV_WARN = 0.25  # per-prompt latency spread above this is called unstable


def baseline_summary(base: list[dict[str, Any]], n_boot: int, level: float) -> dict[str, Any]:
    """The baseline's ITL, TTFT and decode throughput (pooled over prompts)."""
    itl = pooled_itl(base, n_boot, level)
    ttft = [(r["ttft_ms"][0], str(r["prompt_id"])) for r in base if r.get("ttft_ms")]
    return {
        "baseline_itl_ms": est_json(itl),
        "ttft_ms": est_json(
            mean_ci(np.asarray([t for t, _ in ttft]), n_boot, level, clusters=[c for _, c in ttft])
        )
        if ttft
        else None,
        "baseline_tokens_per_s": est_json(tokens_per_s(itl)),
    }


def analyse_group(
    base: list[dict[str, Any]],
    specs: dict[int, list[dict[str, Any]]],
    margin: float,
    n_boot: int,
    level: float,
    target_halfwidth: float,
) -> dict[str, Any]:
    """Everything for one workload × temperature of one drafter's fixed-γ runs (the recommendation
    over every setting is made by the caller)."""
    warnings: list[str] = []
    out: dict[str, Any] = {"n_prompts": len({r["prompt_id"] for r in base})}

    # --- baseline ---
    step_means = np.asarray([np.mean(r["step_ms"]) for r in base if r.get("step_ms")])
    cv_base = coefficient_of_variation(step_means)
    if math.isfinite(cv_base) and cv_base > CV_WARN:
        warnings.append(
            f"unstable timing: baseline per-token latency varies {cv_base:.0%} across prompts "
            "(CV); close other work on the machine or raise repeats"
        )
    out.update(baseline_summary(base, n_boot, level))
    out["baseline_peak_memory_mb"] = json_num(
        max((r["peak_memory_mb"] for r in base), default=math.nan)
    )

    # --- timing model from every speculative round (docs/theory.md §4) ---
    all_spec = [r for rs in specs.values() for r in rs]
    fit = fit_from_records(base, all_spec)
    model = fit.model
    out["baseline_step_ms"] = json_num(model.t_ar_ms)
    draft_steps = fit.draft_steps_ms
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
            "mean": json_num(model.t_draft_ms) if len(draft_steps) else None,
            "median": json_num(float(np.median(draft_steps))) if len(draft_steps) else None,
            "p10": json_num(float(np.percentile(draft_steps, 10))) if len(draft_steps) else None,
            "p90": json_num(float(np.percentile(draft_steps, 90))) if len(draft_steps) else None,
        },
        "verify_fit": {
            "t0_ms": json_num(fit.verify_t0_ms),
            "t1_ms_per_token": json_num(fit.verify_t1_ms),
            "mean_residual_ms_by_drafted": {
                k: json_num(v) for k, v in fit.residual_by_drafted.items()
            },
        },
        "overhead_fit": {
            "o0_ms": json_num(fit.overhead_o0_ms),
            "o1_ms_per_token": json_num(fit.overhead_o1_ms),
        },
        "cost_ratio": json_num(model.t_draft_ms / model.t_ar_ms) if model.t_ar_ms else None,
    }

    # --- acceptance (primary: exact β at the largest γ, the most positions) ---
    gammas = sorted(specs)
    gamma_max = gammas[-1] if gammas else 0
    if gammas:
        acc_max, dra_max = all_rounds(specs[gamma_max])
        pooled = estimate_alpha(all_spec, gamma_max, n_boot, level)
        at_max = estimate_alpha(specs[gamma_max], gamma_max, n_boot, level)
        alpha_primary = pooled.exact_beta
        out["alpha"] = {**(est_json(alpha_primary) or {}), "estimator": "exact_beta"}
        out["alpha_estimators"] = {
            "exact_beta": est_json(pooled.exact_beta),
            "accepted_tested": est_json(pooled.accepted_tested),
            "accepted_proposed": est_json(at_max.accepted_proposed),
            "from_accepted_length": est_json(at_max.from_accepted_length),
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

    # ā(γ) per prompt of the γ_max run, pooled by tokens (docs/theory.md §3)
    empirical = truncation_curve(specs[gamma_max], gamma_max) if gammas else {}
    iid = iid_curve(specs[gamma_max], gamma_max) if gammas else {}

    def predict(g: int, expected: float) -> float | None:
        if not (math.isfinite(expected) and model.finite):
            return None
        return json_num(model.speedup(g, expected))

    rows = []
    errors: dict[str, list[float]] = {"iid": [], "empirical": []}
    for g in range(1, gamma_max + 1):
        iid_tokens = iid.get(g, math.nan)
        emp_tokens = empirical.get(g, math.nan)
        row: dict[str, Any] = {
            "gamma": g,
            "measured": g in specs,
            "predicted_tokens_per_round": {
                "iid": json_num(iid_tokens),
                "empirical": json_num(emp_tokens),
            },
            "predicted_speedup": {
                "iid": predict(g, iid_tokens),
                "empirical": predict(g, emp_tokens),
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
                    "alpha_exact_beta": est_json(est.exact_beta),
                    "accepted_proposed": est_json(est.accepted_proposed),
                    "mean_tokens_per_round": est_json(est.tokens_per_round),
                    "t_verify_ms_median": json_num(float(np.median(verify_g)))
                    if verify_g
                    else None,
                    **measured_latency(base, recs, n_boot, level),
                    "peak_memory_mb": json_num(
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
    store_gamma_rows(out, rows, errors)
    out["warnings"] = warnings
    return out


def rank_methods(
    base: list[dict[str, Any]],
    specs: dict[SettingKey, list[dict[str, Any]]],
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
                "mean_gamma_used": json_num(float(np.mean(used))) if used else None,
                "fallback_rounds": fallback,
                "mean_tokens_per_round": est_json(est.tokens_per_round),
                "accepted_proposed": est_json(est.accepted_proposed),
                "itl_ms": latency["itl_ms"],
                "measured_speedup": latency["measured_speedup"],
            }
        )
    rows.sort(key=lambda r: -((r["measured_speedup"] or {}).get("value") or 0.0))
    return rows


def request_mix(baseline: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How a logged workload's requests were sampled (`dataset.sampling: logged`), one count per
    prompt: temperatures (to 0.1) and top_p (to 0.01) as counts, max tokens as min / median /
    max, and how many values came from the config (absent in the row) or were capped at
    `max_new_tokens`. None for a workload sampled with the config's settings."""
    first: dict[str, dict[str, Any]] = {}
    for rec in baseline:
        if rec.get("sampling") == "logged" and "request" in rec:
            first.setdefault(rec["prompt_id"], rec["request"])
    if not first:
        return None
    reqs = list(first.values())

    def counts(key: str, digits: int) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in reqs:
            out[f"{round(float(r[key]), digits):g}"] += 1
        return dict(sorted(out.items(), key=lambda kv: float(kv[0])))

    max_tokens = sorted(int(r["max_tokens"]) for r in reqs)
    logged = [r.get("logged") or {} for r in reqs]
    return {
        "source": "logged",
        "prompts": len(reqs),
        "temperature": counts("temperature", 1),
        "top_p": counts("top_p", 2),
        "max_tokens": {
            "min": max_tokens[0],
            "median": float(np.median(max_tokens)),
            "max": max_tokens[-1],
        },
        "from_config": {
            k: sum(lg.get(k) is None for lg in logged)
            for k in ("temperature", "top_p", "max_tokens")
        },
        "max_tokens_capped": sum(
            lg.get("max_tokens") is not None and lg["max_tokens"] > r["max_tokens"]
            for lg, r in zip(logged, reqs, strict=True)
        ),
    }


def group_records(records: list[dict[str, Any]]) -> dict[tuple[str, float], dict[str, Any]]:
    """{(workload, temperature): {"baseline": [...], "spec": {(drafter, policy, γ): [...]},
    "failed": [...]}}."""
    groups: dict[tuple[str, float], dict[str, Any]] = defaultdict(
        lambda: {"baseline": [], "spec": defaultdict(list), "failed": []}
    )
    unresolved = {id(r) for r in unresolved_failures(records)}
    for rec in records:
        key = (rec["workload"], float(rec["temperature"]))
        if rec["kind"] == "baseline":
            groups[key]["baseline"].append(rec)
        elif rec["kind"] == "spec":
            setting = (rec.get("drafter", ""), rec.get("policy") or "fixed", int(rec["gamma"]))
            groups[key]["spec"][setting].append(rec)
        elif rec["kind"] == "failed" and id(rec) in unresolved:
            # a failure that `--resume` later completed is history, not a failure of the run
            groups[key]["failed"].append(rec)
    return groups


def build_results(
    records: list[dict[str, Any]], config: dict[str, Any], env: dict[str, Any]
) -> dict[str, Any]:
    """The results.json document (schema RESULTS_SCHEMA)."""
    decision = config.get("decision", {})
    margin = float(decision.get("margin", defaults.MARGIN))
    level = float(decision.get("ci_level", defaults.CI_LEVEL))
    n_boot = int(decision.get("bootstrap", 2000))
    halfwidth = float(decision.get("target_ci_halfwidth", defaults.CI_HALFWIDTH))
    weights = {w["name"]: float(w.get("weight", 1.0)) for w in config.get("workloads", [])}
    order = {w["name"]: i for i, w in enumerate(config.get("workloads", []))}
    entries = []
    failures: list[dict[str, Any]] = []
    pool_inputs: dict[float, list[WorkloadInput]] = defaultdict(list)
    groups = group_records(records)
    primary_label = config.get("draft", {}).get("name") or config.get("draft", {}).get(
        "method", "model"
    )
    for (workload, temp), grp in sorted(
        groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])
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
        weight = weights.get(workload, 1.0)
        if any("concurrency" in r for rs in [grp["baseline"], *grp["spec"].values()] for r in rs):
            # vllm / openai backends: spec-decode counters instead of per-round data
            metrics = group_metrics(records).get((workload, temp), [])
            body, base1, settings1 = engine_entry(
                grp["baseline"],
                dict(grp["spec"]),
                metrics,
                grp["failed"],
                margin,
                n_boot,
                level,
                halfwidth,
            )
            # content validity from the stored answers (docs/theory.md §13)
            base1, settings1 = engine_validity(
                body, base1, settings1, grp["failed"], margin, level, n_boot
            )
        elif grp["baseline"]:
            primary = {
                g: recs
                for (d, p, g), recs in grp["spec"].items()
                if d == primary_label and p == "fixed"
            }
            body = analyse_group(grp["baseline"], primary, margin, n_boot, level, halfwidth)
            body["methods"] = rank_methods(grp["baseline"], dict(grp["spec"]), n_boot, level)
            base1, settings1 = grp["baseline"], dict(grp["spec"])
            # content validity (docs/theory.md §13): the verdict never rests on degenerate answers
            validity = assess(base1, settings1)
            add_acceptance_detail(body, primary, validity, n_boot, level)
            if validity.degenerate:
                base1, settings1 = validity.clean_base, validity.clean_settings
            decide_entry(body, base1, settings1, grp["failed"], margin, level, n_boot)
            restrict_verdict(validity, body, n_boot, level)
            compare_clean(
                validity, body, grp["baseline"], primary, dict(grp["spec"]), margin, level, n_boot
            )
        else:
            continue
        body["failed_units"] = len(grp["failed"])
        mix = request_mix(grp["baseline"])
        if mix is not None:
            body["request_sampling"] = mix
        add_tails(body, grp, primary_label)  # p50/p90/p99 latency (analysis.serving_cost)
        entries.append({"workload": workload, "temperature": temp, "weight": weight, **body})
        own = (body["recommendation"].get("speedup") or {}).get("value") or 1.0
        base_itl = (body.get("baseline_itl_ms") or {}).get("value")
        if base_itl and not degenerate_only(body):
            pool_inputs[temp].append(
                WorkloadInput(
                    workload,
                    weight,
                    base_itl,
                    {k: pair(base1, recs) for k, recs in settings1.items()},
                    own,
                )
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
        "global": global_recommendation(entries, pool_inputs, margin, level, n_boot),
        "economics": with_memory(
            economics_section(entries, groups, config.get("economics"), env.get("device")), env
        ),
        "failures": failures,
    }


def global_recommendation(
    entries: list[dict[str, Any]],
    pool_inputs: dict[float, list[WorkloadInput]],
    margin: float,
    level: float,
    n_boot: int,
) -> dict[str, Any]:
    """Per temperature: one setting (or off) for a pool serving all its workloads, aggregated by
    decode time (`analysis.recommend.pool_recommendation`), with the workloads ON and OFF."""
    out = []
    for temp in sorted({e["temperature"] for e in entries}):
        group = [e for e in entries if e["temperature"] == temp]
        if pool_inputs.get(temp):
            pool = pool_recommendation(temp, pool_inputs[temp], margin, level, n_boot)
        else:  # every workload here lacks a verdict (e.g. degenerate output, docs/theory.md §13)
            pool = {
                "temperature": temp,
                "workloads": [],
                "verdict": "not_measured",
                "gamma": 0,
                "speedup": None,
                "reason": "no workload at this temperature has a measured verdict",
            }
        pool["on_for"] = [e["workload"] for e in group if e["recommendation"]["verdict"] == "on"]
        pool["off_for"] = [e["workload"] for e in group if e["recommendation"]["verdict"] == "off"]
        pool["not_measured"] = [
            e["workload"] for e in group if e["recommendation"]["verdict"] == "not_measured"
        ]
        out.append(pool)
    return {"by_temperature": out}
