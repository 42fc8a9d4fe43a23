"""results.json entries for engine runs (`backend: vllm` / `openai`): acceptance from the engine's
spec-decode counters instead of per-round data, and latency against concurrency.

The entry has the transformers entry's shape (so the report, CSV and console render it), with:
- latency, speedup and the recommendation at the lowest measured concurrency (usually 1);
  speedup = mean decode tokens/s (1 / TPOT) of speculation ÷ baseline, paired by prompt;
- α = accepted / tested (the iid MLE, docs/theory.md §2 (c)) pooled over γ, beside accepted / proposed,
  α from the mean acceptance length τ, and the per-position conditional curve at the largest γ.
  Intervals bootstrap over prompts when the counters were read per request (concurrency 1),
  else over batches; with a single batch there is no interval;
- predictions for unmeasured γ: round time = TPOT × τ per measured γ, fitted r0 + r1·γ, over ā(γ)
  from the iid model or from the per-position counters' truncation curve (docs/theory.md §3);
- `engine`: per-γ counter estimators, and per concurrency the TPOT, TTFT, e2e latency, output
  throughput and speedup, with the concurrency at which speculation stops paying.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from specbench.analysis import roi
from specbench.analysis.latency import measured_latency, pair, pooled_itl, speedup_of, tokens_per_s
from specbench.analysis.predictions import add_prediction_errors, store_gamma_rows
from specbench.analysis.recommend import decide_entry
from specbench.analysis.serialize import est_json as _est
from specbench.analysis.serialize import json_num as _f
from specbench.analysis.spec_counters import SpecCounters, estimates
from specbench.analysis.stats import Estimate, mean_ci, prompts_needed, proportion_ci, ratio_ci
from specbench.analysis.timing_model import TimingModel, linear_fit

NONE_EST = Estimate(math.nan, math.nan, math.nan)


def _conc(rec: dict[str, Any]) -> int:
    return int(rec.get("concurrency", 1))


def _counter_arrays(units: list[SpecCounters], gamma: int) -> dict[str, np.ndarray]:
    """Per-unit arrays (prompt or batch) of the counters at γ."""
    per = np.asarray(
        [list(u.per_pos[:gamma]) + [0.0] * (gamma - len(u.per_pos[:gamma])) for u in units], float
    ).reshape(len(units), gamma)
    drafts = np.asarray([u.drafts for u in units], float)
    accepted = np.asarray([u.accepted for u in units], float)
    has_per = all(len(u.per_pos) >= gamma for u in units)
    tested = accepted + drafts - per[:, gamma - 1] if has_per else np.full(len(units), np.nan)
    return {
        "drafts": drafts,
        "draft_tokens": np.asarray([u.draft_tokens for u in units], float),
        "accepted": accepted,
        "tested": tested,
        "per_pos": per if has_per else np.empty((len(units), 0)),
    }


def counter_estimators(
    units: list[SpecCounters], gamma: int, n_boot: int, level: float
) -> dict[str, Any]:
    """specbench's estimators with bootstrap intervals over the units (prompts or batches)."""
    a = _counter_arrays(units, gamma)
    per_round = ratio_ci(a["accepted"], a["drafts"], n_boot, level)
    tau = Estimate(1 + per_round.value, 1 + per_round.lo, 1 + per_round.hi)

    def solve(t: float) -> float:
        if not math.isfinite(t):
            return math.nan
        return roi.alpha_from_accepted(min(max(t, 1.0), gamma + 1.0), gamma)

    per_pos = a["per_pos"]
    conditional = []
    for i in range(per_pos.shape[1]):
        den = a["drafts"] if i == 0 else per_pos[:, i - 1]
        conditional.append(
            _est(proportion_ci(per_pos[:, i], den, n_boot, level)) if den.sum() > 0 else None
        )
    total = units[0]
    for u in units[1:]:
        total = total.plus(u)
    point = estimates(total, gamma)
    return {
        "gamma": gamma,
        "units": len(units),
        "rounds": _f(float(a["drafts"].sum())),
        "mean_accepted_length": _est(tau),
        "accepted_proposed": _est(proportion_ci(a["accepted"], a["draft_tokens"], n_boot, level)),
        "accepted_tested": _est(proportion_ci(a["accepted"], a["tested"], n_boot, level))
        if per_pos.shape[1]
        else None,
        "from_accepted_length": _est(Estimate(solve(tau.value), solve(tau.lo), solve(tau.hi))),
        "per_position": conditional,
        "per_position_rate": [_f(x) if x is not None else None for x in point.per_position_rate],
        "histogram": point.histogram,
        "truncation": {str(g): _f(v) for g, v in point.truncation.items()},
        "counters": total.to_dict(),
    }


def _units_for(
    recs: list[dict[str, Any]], metrics: list[dict[str, Any]], c_ref: int
) -> tuple[list[tuple[Any, SpecCounters]], str]:
    """(unit key, counters): per request at the reference concurrency, else per batch."""
    per_request = [
        ((r["prompt_id"], r.get("repeat", 0)), SpecCounters.from_dict(r["spec_counters"]))
        for r in recs
        if _conc(r) == c_ref and r.get("spec_counters")
    ]
    if per_request:
        return per_request, "per_request_counters"
    # a resumed batch adds a partial metrics record for the rest of its prompts: one unit per
    # (concurrency, repeat), its counters summed
    by_batch: dict[Any, SpecCounters] = {}
    for m in metrics:
        if m.get("spec_counters"):
            key = (_conc(m), m.get("repeat", 0))
            c = SpecCounters.from_dict(m["spec_counters"])
            by_batch[key] = by_batch[key].plus(c) if key in by_batch else c
    batches = list(by_batch.items())
    return batches, ("batch_counters" if batches else "unavailable")


def _throughput(metrics: list[dict[str, Any]], gamma: int, c: int) -> float | None:
    vals = [
        m["output_tokens_per_s"]
        for m in metrics
        if int(m["gamma"]) == gamma
        and _conc(m) == c
        and m.get("output_tokens_per_s")
        and not m.get("partial")  # a resumed batch's rest ran at a lower load
    ]
    return _f(float(np.mean(vals))) if vals else None


def _latency(recs: list[dict[str, Any]], n_boot: int, level: float) -> dict[str, Any]:
    tpot = [r["tpot_ms"] for r in recs if r.get("tpot_ms")]
    return {
        "n": len(recs),
        "tpot_ms": _est(mean_ci(np.asarray(tpot), n_boot, level)) if tpot else None,
        "ttft_ms": _est(mean_ci(np.asarray([r["ttft_ms"][0] for r in recs]), n_boot, level))
        if recs
        else None,
        "e2e_ms": _est(mean_ci(np.asarray([r["wall_ms"] for r in recs]), n_boot, level))
        if recs
        else None,
    }


def concurrency_table(
    base: list[dict[str, Any]],
    specs: dict[int, list[dict[str, Any]]],
    metrics: list[dict[str, Any]],
    margin: float,
    n_boot: int,
    level: float,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per concurrency: latency and throughput of the baseline and each γ, the speedups, and for
    each γ the concurrency at which speculation stops paying (CI low end ≤ 1 + margin)."""
    levels = sorted({_conc(r) for r in base} | {_conc(r) for rs in specs.values() for r in rs})
    rows = []
    for c in levels:
        b = [r for r in base if _conc(r) == c]
        row: dict[str, Any] = {
            "concurrency": c,
            "baseline": {
                **_latency(b, n_boot, level),
                "output_tokens_per_s": _throughput(metrics, 0, c),
            },
            "gammas": {},
        }
        base_tp = row["baseline"]["output_tokens_per_s"]
        for g, recs in sorted(specs.items()):
            s = [r for r in recs if _conc(r) == c]
            if not s:
                continue
            speed = speedup_of(pair(b, s), n_boot, level)
            tp = _throughput(metrics, g, c)
            row["gammas"][str(g)] = {
                **_latency(s, n_boot, level),
                "output_tokens_per_s": tp,
                "speedup": _est(speed),
                "throughput_ratio": _f(tp / base_tp) if tp and base_tp else None,
            }
        rows.append(row)
    stops: dict[str, Any] = {}
    for g in sorted(specs):
        pays = []
        for row in rows:
            sp = (row["gammas"].get(str(g)) or {}).get("speedup")
            if sp is None or sp["value"] is None:
                continue
            lo = sp["ci95"][0] if sp["ci95"][0] is not None else sp["value"]
            pays.append((row["concurrency"], lo > 1.0 + margin))
        first_fail = next((c for c, ok in pays if not ok), None)
        stops[str(g)] = {
            "pays_at": [c for c, ok in pays if ok],
            "stops_paying_at": first_fail if pays and pays[0][1] else None,
            "never_pays": bool(pays) and not any(ok for _, ok in pays),
        }
    return rows, stops


def analyse_engine_group(
    base: list[dict[str, Any]],
    settings: dict[tuple[str, str, int], list[dict[str, Any]]],
    metrics: list[dict[str, Any]],
    n_boot: int,
    level: float,
    target_halfwidth: float,
    margin: float = 0.05,
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[tuple[str, str, int], list[dict[str, Any]]]]:
    """The results entry of one workload × temperature of an engine run, with the baseline and
    settings at the reference concurrency (the caller decides on those: `results.decide`)."""
    specs: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for (_, _, g), recs in settings.items():
        specs[g] += recs
    warnings: list[str] = []
    all_recs = base + [r for rs in specs.values() for r in rs]
    c_ref = min((_conc(r) for r in all_recs), default=1)
    base1 = [r for r in base if _conc(r) == c_ref]
    specs1 = {g: [r for r in rs if _conc(r) == c_ref] for g, rs in specs.items()}
    settings1 = {k: [r for r in rs if _conc(r) == c_ref] for k, rs in settings.items()}
    out: dict[str, Any] = {"n_prompts": len({r["prompt_id"] for r in base1})}
    base_itl = pooled_itl(base1, n_boot, level) or Estimate(math.nan, math.nan, math.nan)
    out["baseline_itl_ms"] = _est(base_itl)
    out["baseline_step_ms"] = _f(base_itl.value)
    out["ttft_ms"] = (
        _est(mean_ci(np.asarray([r["ttft_ms"][0] for r in base1]), n_boot, level))
        if base1
        else None
    )
    out["baseline_tokens_per_s"] = _est(tokens_per_s(base_itl))
    out["baseline_peak_memory_mb"] = None

    # --- acceptance from the counters ---
    gammas = sorted(specs)
    per_gamma: dict[str, Any] = {}
    sources: set[str] = set()
    pooled: dict[Any, list[float]] = defaultdict(lambda: [0.0, 0.0])  # prompt → [accepted, tested]
    for g in gammas:
        keyed, source = _units_for(specs[g], [m for m in metrics if int(m["gamma"]) == g], c_ref)
        sources.add(source)
        if not keyed:
            warnings.append(
                f"γ={g}: the engine reported no spec-decode counters; acceptance unavailable"
            )
            continue
        units = [u for _, u in keyed]
        per_gamma[str(g)] = {**counter_estimators(units, g, n_boot, level), "source": source}
        arr = _counter_arrays(units, g)
        if source == "per_request_counters" and np.isfinite(arr["tested"]).all():
            for (key, _), acc, tst in zip(keyed, arr["accepted"], arr["tested"], strict=True):
                pooled[key][0] += acc
                pooled[key][1] += tst
    gauges = [m["accept_length_gauge"] for m in metrics if m.get("accept_length_gauge") is not None]
    g_max = max((int(k) for k in per_gamma), default=0)
    top = per_gamma.get(str(g_max))
    if pooled:
        # Prompts are the units; a prompt's counts are summed over the γ it was run at.
        acc, tst = (np.asarray(v, float) for v in zip(*pooled.values(), strict=True))
        alpha = proportion_ci(acc, tst, n_boot, level)
        out["alpha"] = {**_est(alpha), "estimator": "accepted_tested"}  # type: ignore[dict-item]
    elif top is not None and top.get("accepted_tested"):
        out["alpha"] = {**top["accepted_tested"], "estimator": "accepted_tested"}
    else:
        out["alpha"] = None
    if top is not None:
        out["alpha_estimators"] = {
            "exact_beta": None,
            "accepted_tested": top["accepted_tested"],
            "accepted_proposed": top["accepted_proposed"],
            "from_accepted_length": top["from_accepted_length"],
            "mean_accepted_length": top["mean_accepted_length"],
            "at_gamma": g_max,
        }
        out["per_position_acceptance"] = [p["value"] if p else None for p in top["per_position"]]
        out["accepted_histogram"] = top["histogram"]
        ap = (top["accepted_proposed"] or {}).get("value")
        if ap is not None and ap < 0.4:
            warnings.append(
                f"accepted/proposed is {ap:.2f} at γ={g_max} (< 0.4): speculation often costs "
                "latency at such rates"
            )
        a = out.get("alpha") or {}
        lo, hi = (a.get("ci95") or [None, None])[:2]
        if lo is not None and hi is not None and (hi - lo) / 2 > target_halfwidth:
            need = prompts_needed(out["n_prompts"], (hi - lo) / 2, target_halfwidth)
            warnings.append(
                f"too few prompts: α CI half-width {(hi - lo) / 2:.3f} > {target_halfwidth}; "
                f"about {need} prompts would reach it"
            )

    # --- timing model: round time = TPOT × τ per measured γ ---
    round_pts = []
    for g in gammas:
        tau = ((per_gamma.get(str(g)) or {}).get("mean_accepted_length") or {}).get("value")
        itl = [r["tpot_ms"] for r in specs1[g] if r.get("tpot_ms")]
        if tau is not None and itl:
            round_pts.append((g, float(np.mean(itl)) * tau))
    if round_pts:
        r0, r1, _ = linear_fit(
            np.asarray([p[0] for p in round_pts]), np.asarray([p[1] for p in round_pts])
        )
    else:
        r0, r1 = math.nan, math.nan
    t_ar = base_itl.value
    out["timing"] = {
        "t_draft_ms": {"mean": None, "median": None, "p10": None, "p90": None},
        "verify_fit": {"t0_ms": None, "t1_ms_per_token": None, "mean_residual_ms_by_drafted": {}},
        "overhead_fit": {"o0_ms": None, "o1_ms_per_token": None},
        "cost_ratio": _f(r1 / t_ar) if math.isfinite(r1) and t_ar else None,
        "engine_round_fit": {"r0_ms": _f(r0), "r1_ms_per_token": _f(r1), "points": len(round_pts)},
    }
    if len(round_pts) == 1:
        warnings.append(
            "one measured γ: predictions for other γ assume round time does not grow with γ"
        )

    alpha_v = (out.get("alpha") or {}).get("value")
    trunc = {int(k): v for k, v in (top or {}).get("truncation", {}).items()}

    # the one speed model, with the engine's whole round (draft + verify) as t0 + t1·γ
    model = TimingModel(t_ar, 0.0, r0, r1)

    def predict(g: int, tokens: float | None) -> float | None:
        if tokens is None or not model.finite or model.round_ms(g) <= 0:
            return None
        return _f(model.speedup(g, tokens))

    rows = []
    errors: dict[str, list[float]] = {"iid": [], "empirical": []}
    for g in range(1, g_max + 1) if gammas else []:
        iid = roi.expected_tokens(g, min(max(alpha_v, 0.0), 1.0)) if alpha_v is not None else None
        emp = trunc.get(g)
        row: dict[str, Any] = {
            "gamma": g,
            "measured": g in specs1 and bool(specs1[g]),
            "predicted_tokens_per_round": {
                "iid": _f(iid) if iid else None,
                "empirical": _f(emp) if emp else None,
            },
            "predicted_speedup": {"iid": predict(g, iid), "empirical": predict(g, emp)},
            "measured_speedup": None,
        }
        if row["measured"]:
            recs = specs1[g]
            latency = measured_latency(base1, recs, n_boot, level)
            pg = per_gamma.get(str(g)) or {}
            row.update(
                {
                    "alpha_exact_beta": None,
                    "accepted_proposed": pg.get("accepted_proposed"),
                    "mean_tokens_per_round": pg.get("mean_accepted_length"),
                    "t_verify_ms_median": None,
                    **latency,
                    "peak_memory_mb": None,
                }
            )
            tau = (pg.get("mean_accepted_length") or {}).get("value")
            if tau is not None and tau < 1.5:
                warnings.append(f"γ={g}: mean tokens per round {tau:.2f} < 1.5")
            measured = (latency["measured_speedup"] or {}).get("value")
            add_prediction_errors(errors, row, measured)
        rows.append(row)
    store_gamma_rows(out, rows, errors)
    if not base1:
        warnings.append(
            "no baseline measured: add a setting without speculation (a server with gamma: 0)"
        )

    conc_rows, stops = concurrency_table(base, specs, metrics, margin, n_boot, level)
    out["engine"] = {
        "backend": next((r.get("backend") for r in all_recs if r.get("backend")), None),
        "reference_concurrency": c_ref,
        "acceptance_source": sorted(sources)[0] if len(sources) == 1 else sorted(sources),
        "per_gamma": per_gamma,
        "accept_length_gauge": _f(float(np.mean(gauges))) if gauges else None,
        "concurrency": conc_rows,
        "stops_paying": stops,
        "metrics_available": all(m.get("metrics_available", True) for m in metrics),
    }
    if metrics and not out["engine"]["metrics_available"]:
        warnings.append("the server has no /metrics: acceptance unavailable, latency measured")
    out["warnings"] = list(dict.fromkeys(warnings))
    return out, base1, settings1


def engine_entry(
    base: list[dict[str, Any]],
    settings: dict[tuple[str, str, int], list[dict[str, Any]]],
    metrics: list[dict[str, Any]],
    failed: list[dict[str, Any]],
    margin: float,
    n_boot: int,
    level: float,
    target_halfwidth: float,
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[tuple[str, str, int], list[dict[str, Any]]]]:
    """The analysed and decided entry of one workload × temperature of an engine run, with the
    concurrency at which the chosen γ stops paying."""
    body, base1, settings1 = analyse_engine_group(
        base, settings, metrics, n_boot, level, target_halfwidth, margin
    )
    decide_entry(body, base1, settings1, failed, margin, level, n_boot)
    rec = body["recommendation"]
    eng = body["engine"]
    chosen = rec.get("gamma") or (rec.get("best_measured") or {}).get("gamma")
    eng["chosen_gamma"] = chosen
    eng["chosen_stops_paying_at"] = (
        (eng["stops_paying"].get(str(chosen)) or {}).get("stops_paying_at") if chosen else None
    )
    return body, base1, settings1


def group_metrics(records: list[dict[str, Any]]) -> dict[tuple[str, float], list[dict[str, Any]]]:
    """engine_metrics records by (workload, temperature)."""
    out: dict[tuple[str, float], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        if rec.get("kind") == "engine_metrics":
            out[(rec["workload"], float(rec["temperature"]))].append(rec)
    return out
