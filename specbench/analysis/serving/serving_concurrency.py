"""Latency and throughput of an engine run against concurrency: per number of requests in
flight, the baseline's and each γ's TPOT, TTFT, end-to-end latency and output throughput, the
speedup (paired by prompt, `analysis.estimators.latency`), and for each γ the concurrency at which
speculation stops paying (the speedup's CI low end ≤ 1 + margin)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from specbench.analysis.estimators.latency import pair, speedup_of
from specbench.analysis.serving.serving_acceptance import concurrency_of
from specbench.analysis.stats.resampling import mean_ci
from specbench.analysis.stats.serialize import est_json, json_num
from specbench.record_line import RecordLine

Record = RecordLine


def output_throughput(metrics: Sequence[Record], gamma: int, c: int) -> float | None:
    """Mean output tokens/s of the batches of γ at concurrency c (complete batches only)."""
    vals = [
        x
        for m in metrics
        if int(m["gamma"]) == gamma
        and concurrency_of(m) == c
        and (x := m.get("output_tokens_per_s"))
        and not m.get("partial")  # a resumed batch's rest ran at a lower load
    ]
    return json_num(float(np.mean(vals))) if vals else None


def request_latency(recs: Sequence[Record], n_boot: int, level: float) -> dict[str, Any]:
    """Mean TPOT, TTFT and end-to-end latency of the requests, with intervals."""
    tpot = [r["tpot_ms"] for r in recs if r.get("tpot_ms")]
    return {
        "n": len(recs),
        "tpot_ms": est_json(mean_ci(np.asarray(tpot), n_boot, level)) if tpot else None,
        "ttft_ms": est_json(mean_ci(np.asarray([r["ttft_ms"][0] for r in recs]), n_boot, level))
        if recs
        else None,
        "e2e_ms": est_json(mean_ci(np.asarray([r["wall_ms"] for r in recs]), n_boot, level))
        if recs
        else None,
    }


def stops_paying(rows: Sequence[dict[str, Any]], gamma: int, margin: float) -> dict[str, Any]:
    """The concurrencies at which γ pays, and the first at which it stops (None when it never
    paid or never stopped)."""
    pays = []
    for row in rows:
        sp = (row["gammas"].get(str(gamma)) or {}).get("speedup")
        if sp is None or sp["value"] is None:
            continue
        lo = sp["ci95"][0] if sp["ci95"][0] is not None else sp["value"]
        pays.append((row["concurrency"], lo > 1.0 + margin))
    first_fail = next((c for c, ok in pays if not ok), None)
    return {
        "pays_at": [c for c, ok in pays if ok],
        "stops_paying_at": first_fail if pays and pays[0][1] else None,
        "never_pays": bool(pays) and not any(ok for _, ok in pays),
    }


def concurrency_table(
    base: Sequence[Record],
    specs: Mapping[int, Sequence[Record]],
    metrics: Sequence[Record],
    margin: float,
    n_boot: int,
    level: float,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per concurrency: latency and throughput of the baseline and each γ, the speedups; and per
    γ where it stops paying (`stops_paying`)."""
    levels = sorted(
        {concurrency_of(r) for r in base} | {concurrency_of(r) for rs in specs.values() for r in rs}
    )
    rows = []
    for c in levels:
        b = [r for r in base if concurrency_of(r) == c]
        row: dict[str, Any] = {
            "concurrency": c,
            "baseline": {
                **request_latency(b, n_boot, level),
                "output_tokens_per_s": output_throughput(metrics, 0, c),
            },
            "gammas": {},
        }
        base_tp = row["baseline"]["output_tokens_per_s"]
        for g, recs in sorted(specs.items()):
            s = [r for r in recs if concurrency_of(r) == c]
            if not s:
                continue
            speed = speedup_of(pair(b, s), n_boot, level)
            tp = output_throughput(metrics, g, c)
            row["gammas"][str(g)] = {
                **request_latency(s, n_boot, level),
                "output_tokens_per_s": tp,
                "speedup": est_json(speed),
                "throughput_ratio": json_num(tp / base_tp) if tp and base_tp else None,
            }
        rows.append(row)
    return rows, {str(g): stops_paying(rows, g, margin) for g in sorted(specs)}
