"""Latency and throughput of an engine run against concurrency: per number of requests in
flight, the baseline's and each γ's TPOT, TTFT, end-to-end latency and output throughput, the
speedup (paired by prompt, `analysis.estimators.latency`), and for each γ the concurrency at which
speculation stops paying (the speedup's CI low end ≤ 1 + margin)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.documents.results_model_base import EstimateJSON, est_model
from specbench.analysis.documents.results_model_engine import (
    ConcurrencyCell,
    ConcurrencyLatency,
    ConcurrencyRow,
    StopsPaying,
)
from specbench.analysis.estimators.latency import pair, speedup_of
from specbench.analysis.serving.serving_acceptance import concurrency_of
from specbench.analysis.stats.resampling import mean_ci
from specbench.analysis.stats.serialize import json_num
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


@dataclass(frozen=True)
class RequestLatency:
    """Mean TPOT, TTFT and end-to-end latency of a setting's requests, with intervals: the
    request figures of a concurrency row's cell (`ConcurrencyLatency`) and of a schedule row."""

    n: int
    tpot_ms: EstimateJSON | None
    ttft_ms: EstimateJSON | None
    e2e_ms: EstimateJSON | None


def request_latency(recs: Sequence[Record], n_boot: int, level: float) -> RequestLatency:
    """Mean TPOT, TTFT and end-to-end latency of the requests, with intervals."""
    tpot = [r["tpot_ms"] for r in recs if r.get("tpot_ms")]
    return RequestLatency(
        n=len(recs),
        tpot_ms=est_model(mean_ci(np.asarray(tpot), n_boot, level)) if tpot else None,
        ttft_ms=est_model(mean_ci(np.asarray([r["ttft_ms"][0] for r in recs]), n_boot, level))
        if recs
        else None,
        e2e_ms=est_model(mean_ci(np.asarray([r["wall_ms"] for r in recs]), n_boot, level))
        if recs
        else None,
    )


def stops_paying(rows: Sequence[ConcurrencyRow], gamma: int, margin: float) -> StopsPaying:
    """The concurrencies at which γ pays, and the first at which it stops (None when it never
    paid or never stopped)."""
    pays = []
    for row in rows:
        cell = row.gammas.get(str(gamma))
        sp = cell.speedup if cell is not None else None
        if sp is None or sp.value is None:
            continue
        lo = sp.ci95[0] if sp.ci95[0] is not None else sp.value
        pays.append((row.concurrency, lo > 1.0 + margin))
    first_fail = next((c for c, ok in pays if not ok), None)
    return StopsPaying(
        pays_at=[c for c, ok in pays if ok],
        stops_paying_at=first_fail if pays and pays[0][1] else None,
        never_pays=bool(pays) and not any(ok for _, ok in pays),
    )


def concurrency_table(
    base: Sequence[Record],
    specs: Mapping[int, Sequence[Record]],
    metrics: Sequence[Record],
    margin: float,
    n_boot: int,
    level: float,
) -> tuple[list[ConcurrencyRow], dict[str, StopsPaying]]:
    """Per concurrency: latency and throughput of the baseline and each γ, the speedups; and per
    γ where it stops paying (`stops_paying`)."""
    levels = sorted(
        {concurrency_of(r) for r in base} | {concurrency_of(r) for rs in specs.values() for r in rs}
    )
    rows = []
    for c in levels:
        b = [r for r in base if concurrency_of(r) == c]
        lat = request_latency(b, n_boot, level)
        base_tp = output_throughput(metrics, 0, c)
        baseline = ConcurrencyLatency(
            n=lat.n,
            tpot_ms=lat.tpot_ms,
            ttft_ms=lat.ttft_ms,
            e2e_ms=lat.e2e_ms,
            output_tokens_per_s=base_tp,
        )
        gammas = {}
        for g, recs in sorted(specs.items()):
            s = [r for r in recs if concurrency_of(r) == c]
            if not s:
                continue
            speed = speedup_of(pair(b, s), n_boot, level)
            tp = output_throughput(metrics, g, c)
            lat = request_latency(s, n_boot, level)
            gammas[str(g)] = ConcurrencyCell(
                n=lat.n,
                tpot_ms=lat.tpot_ms,
                ttft_ms=lat.ttft_ms,
                e2e_ms=lat.e2e_ms,
                output_tokens_per_s=tp,
                speedup=est_model(speed),
                throughput_ratio=json_num(tp / base_tp) if tp and base_tp else None,
            )
        rows.append(ConcurrencyRow(concurrency=c, baseline=baseline, gammas=gammas))
    return rows, {str(g): stops_paying(rows, g, margin) for g in sorted(specs)}
