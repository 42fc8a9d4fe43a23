"""Tail latency and serving economics of a run: additive results.json fields (schema 2).

Tails (`tails` under each measured γ row, `baseline_tails` per entry, and per setting of an engine
run's concurrency rows): p50 / p90 / p99 of TTFT (first turn), TPOT and end-to-end latency over a
setting's requests, numpy's linear-interpolation percentile. A percentile p is reported only when
the sample holds at least 1 / (1 − p) requests (p90 ≥ 10, p99 ≥ 100; p50 ≥ 2): below that the
"tail" would be the sample's maximum, not a p-quantile. No interval: a tail is shown as measured.

Economics (`economics` at the top level), from the GPU-hour price and the GPUs serving the target
(`--gpu-hour-usd`, `--gpus`, or the config's `economics:` section), via the one cost formula
`analysis.arithmetic.roi.economics`:
- transformers runs (batch 1): USD per 10⁶ output tokens at the baseline's and at the recommended
  setting's decode ITL — for a workload that stays OFF, at its best measured γ's, what turning it
  on would cost (prefill excluded, as in `specbench roi`);
- engine runs, at each measured concurrency: USD per 10⁶ output tokens from the whole batch's
  output tokens/s, baseline and each γ;
- per workload also the TTFT change (mean over the same prompts, speculation − baseline) and the
  draft's memory as the CUDA peak-memory delta of the recommended γ over the baseline (null on
  CPU, where the process's peak RSS only grows and cannot separate the draft; engine runs: null).

The draft's memory (`draft_memory`, `kv_capacity` at the top of `economics`), from env.json's
`memory`: each draft's weights and KV bytes per token (the transformers runner's loaded models;
engine runs: computed from config.json and the safetensors headers, `source: "computed"`), and
for engine runs the KV-cache capacity in tokens each engine reported (`source: "engine"`) and
the share of it that speculation takes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specbench.analysis.arithmetic.roi import economics
from specbench.analysis.documents.results_model_base import LatencyTails
from specbench.analysis.stats.serialize import json_num
from specbench.config.stored import StoredEconomics
from specbench.record_line import RecordLine

PERCENTILES = (50, 90, 99)


def _percentiles(values: list[float]) -> dict[str, float | None]:
    arr = np.asarray([v for v in values if v is not None], float)
    out: dict[str, float | None] = {}
    for p in PERCENTILES:
        enough = len(arr) >= max(2, int(np.ceil(1.0 / (1.0 - p / 100.0) - 1e-9)))
        out[f"p{p}"] = json_num(float(np.percentile(arr, p))) if enough else None
    return out


def latency_tails(recs: list[RecordLine]) -> dict[str, Any] | None:
    """p50/p90/p99 of TTFT (first turn), TPOT and e2e (ms) over requests; None without records."""
    ok = [r for r in recs if r.get("status", "ok") == "ok"]
    if not ok:
        return None
    return {
        "n": len(ok),
        "ttft_ms": _percentiles([r["ttft_ms"][0] for r in ok if r.get("ttft_ms")]),
        "tpot_ms": _percentiles([x for r in ok if (x := r.get("tpot_ms"))]),
        "e2e_ms": _percentiles([r["wall_ms"] for r in ok if r.get("wall_ms") is not None]),
    }


def _conc(r: dict[str, Any]) -> int:
    return int(r.get("concurrency", 1))


def add_tails(body: dict[str, Any], grp: dict[str, Any], primary: str | None) -> None:
    """Attach tails to an analysed entry, in place: the baseline's, each measured γ row's (the
    primary drafter at a fixed γ; engine runs: the reference concurrency) and, for engine runs,
    every concurrency row's settings."""
    eng = body.get("engine")
    c_ref = (eng or {}).get("reference_concurrency", 1)

    def spec_at(g: int, c: int | None) -> list[RecordLine]:
        return [
            r
            for (drafter, policy, gamma), rs in grp["spec"].items()
            if gamma == g and (eng is not None or (drafter == primary and policy == "fixed"))
            for r in rs
            if c is None or _conc(r) == c
        ]

    base = [r for r in grp["baseline"] if eng is None or _conc(r) == c_ref]
    body["baseline_tails"] = latency_tails(base)
    for row in body.get("gammas", []):
        if row.measured:
            tails = latency_tails(spec_at(row.gamma, c_ref if eng else None))
            row.tails = LatencyTails.model_validate(tails) if tails is not None else None
    for crow in (eng or {}).get("concurrency") or []:
        c = crow["concurrency"]
        crow["baseline"]["tails"] = latency_tails([r for r in grp["baseline"] if _conc(r) == c])
        for g, cell in crow["gammas"].items():
            cell["tails"] = latency_tails(spec_at(int(g), c))


def _mean_ttft_by_prompt(recs: list[RecordLine]) -> dict[Any, float]:
    by: dict[Any, list[float]] = {}
    for r in recs:
        if r.get("ttft_ms"):
            by.setdefault((r["prompt_id"], r.get("repeat", 0)), []).append(r["ttft_ms"][0])
    return {k: float(np.mean(v)) for k, v in by.items()}


def _usd(itl_off: float | None, itl_on: float | None, price: float | None, gpus: int) -> Any:
    """(off, on) USD per 10⁶ output tokens; a side without a measured time is None."""

    def one(itl: float | None) -> float | None:
        if price is None or not itl:
            return None
        return json_num(economics(itl, itl, price, gpus).usd_per_million_tokens_off)

    return one(itl_off), one(itl_on)


def draft_memory(env: dict[str, Any]) -> dict[str, Any] | None:
    """What each draft costs in memory (docs/theory.md §12), from env.json's model profiles:
    its weights, its own KV cache per token, and the target-KV capacity it takes — the tokens of
    target KV cache its weights would otherwise hold, and the share of each sequence's cache that
    the draft's KV adds (draft / (target + draft) KV bytes per token). `source`: "computed" for
    an engine run's profiles (config.json and safetensors headers), "loaded" for the transformers
    runner's (the loaded parameters)."""
    mem = env.get("memory") or {}
    target = mem.get("target") or {}
    t_kv = target.get("kv_bytes_per_token")
    t_w = target.get("weight_bytes")
    out = {}
    for label, d in (mem.get("drafts") or {}).items():
        d_kv = d.get("kv_bytes_per_token")
        d_w = d.get("weight_bytes")
        out[label] = {
            "weights_mib": json_num(d_w / 2**20) if d_w is not None else None,
            "weights_share_of_target": json_num(d_w / t_w) if d_w is not None and t_w else None,
            "kv_kib_per_token": json_num(d_kv / 1024) if d_kv else None,
            "target_kv_tokens_displaced": int(d_w // t_kv) if d_w is not None and t_kv else None,
            "kv_share_per_sequence": json_num(d_kv / (t_kv + d_kv)) if t_kv and d_kv else None,
            "source": d.get("source", "loaded"),
        }
    return out or None


def kv_capacity_taken(env: dict[str, Any]) -> dict[str, Any] | None:
    """The KV-cache capacity speculation takes, from the capacities the engines reported
    (env.json `memory.kv_capacity`, `harness.serving.metrics.engine_memory`): per γ, the capacity in
    tokens of the speculative engine, and (capacity off − capacity on) / capacity off against the
    engine without speculation — the draft's weights and its own KV cache, as the engine sized
    them. None when no engine reported its capacity."""
    caps = (env.get("memory") or {}).get("kv_capacity") or []
    if not caps:
        return None
    base = next((c["tokens"] for c in caps if c["gamma"] == 0), None)
    by_gamma = {}
    for c in sorted(caps, key=lambda c: c["gamma"]):
        if c["gamma"] == 0:
            continue
        taken = base - c["tokens"] if base else None
        by_gamma[str(c["gamma"])] = {
            "label": c.get("label"),
            "tokens": c["tokens"],
            "taken_tokens": taken,
            "taken_share": json_num(taken / base) if taken is not None and base else None,
        }
    return {"source": "engine", "baseline_tokens": base, "by_gamma": by_gamma}


def economics_section(
    entries: list[dict[str, Any]],
    groups: dict[tuple[str, float], dict[str, Any]],
    settings: StoredEconomics | None,
    device: str | None = "cuda",
) -> dict[str, Any]:
    """The `economics` block: inputs, and per workload × temperature the cost per 10⁶ output
    tokens with and without speculation at each measured load, the TTFT change and draft memory."""
    price = settings.gpu_hour_usd if settings else None
    gpus = int((settings.gpus if settings else None) or 1)
    rows = []
    for e in entries:
        rec = e["recommendation"]
        gamma = rec.get("gamma") or (rec.get("best_measured") or {}).get("gamma")
        grp = groups.get((e["workload"], float(e["temperature"])))
        row: dict[str, Any] = {
            "workload": e["workload"],
            "temperature": e["temperature"],
            "gamma": gamma,
            "verdict": rec["verdict"],
            "loads": [],
        }
        grow = next((g for g in e.get("gammas", []) if g.gamma == gamma), None)
        eng = e.get("engine")
        if eng:
            for crow in eng.get("concurrency") or []:
                cell = crow["gammas"].get(str(gamma)) if gamma else None
                tp_off = crow["baseline"].get("output_tokens_per_s")
                tp_on = (cell or {}).get("output_tokens_per_s")
                # a batch's cost per token is its time per token: 1000 / tokens-per-s ms
                off, on = _usd(
                    1000.0 / tp_off if tp_off else None,
                    1000.0 / tp_on if tp_on else None,
                    price,
                    gpus,
                )
                row["loads"].append(
                    {
                        "concurrency": crow["concurrency"],
                        "usd_per_million_off": off,
                        "usd_per_million_on": on,
                        "basis": "batch output tokens/s",
                    }
                )
        else:
            itl = rec.get("itl_ms") or {}
            off_itl = itl.get("baseline") or (e.get("baseline_itl_ms") or {}).get("value")
            # ON: the recommended setting; OFF: the best measured γ (what turning it on costs)
            on_itl = (
                itl.get("speculative")
                if rec["verdict"] == "on"
                else (grow.itl_ms.value if grow and grow.itl_ms else None)
            )
            off, on = _usd(off_itl, on_itl, price, gpus)
            row["loads"].append(
                {
                    "concurrency": 1,
                    "usd_per_million_off": off,
                    "usd_per_million_on": on,
                    "basis": "batch-1 decode ITL",
                }
            )
        ttft_change = None
        if grp is not None and gamma:
            c_ref = (eng or {}).get("reference_concurrency", 1)
            base = _mean_ttft_by_prompt(
                [r for r in grp["baseline"] if not eng or _conc(r) == c_ref]
            )
            spec = _mean_ttft_by_prompt(
                [
                    r
                    for (_, _, g), rs in grp["spec"].items()
                    if g == gamma
                    for r in rs
                    if not eng or _conc(r) == c_ref
                ]
            )
            common = sorted(set(base) & set(spec), key=str)
            if common:
                ttft_change = json_num(float(np.mean([spec[k] - base[k] for k in common])))
        row["ttft_change_ms"] = ttft_change
        base_mem = e.get("baseline_peak_memory_mb")
        on_mem = grow.peak_memory_mb if grow else None
        measurable = device is not None and str(device).startswith("cuda")
        row["draft_memory_mb"] = (
            json_num(on_mem - base_mem)
            if measurable and on_mem is not None and base_mem is not None
            else None
        )
        rows.append(row)
    return {"gpu_hour_usd": price, "gpus": gpus, "by_workload": rows}


def with_memory(econ: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """The economics block with the draft's memory and, for engine runs that report it, the KV
    capacity speculation takes."""
    return {**econ, "draft_memory": draft_memory(env), "kv_capacity": kv_capacity_taken(env)}
