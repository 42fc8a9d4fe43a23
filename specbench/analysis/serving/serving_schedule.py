"""The "schedule" setting of a vLLM run (`speculative.schedule`: γ by batch size, measured as one
more engine beside the fixed γ values): per concurrency, its latency and throughput, its speedup
against the engine without speculation and against the best fixed γ at that concurrency (the
one with the highest output tokens/s), each paired by prompt (`analysis.estimators.latency`).

Its records carry drafter "schedule" and γ = the schedule's largest k; `split_schedule` keeps them
out of the fixed-γ analysis, which keys settings by γ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specbench.analysis.documents.results_model_base import est_model
from specbench.analysis.documents.results_model_engine import ConcurrencyRow, MeasuredScheduleRow
from specbench.analysis.estimators.latency import pair, speedup_of
from specbench.analysis.serving.serving_acceptance import concurrency_of
from specbench.analysis.serving.serving_concurrency import request_latency
from specbench.analysis.stats.serialize import json_num
from specbench.record_line import RecordLine

Record = RecordLine
SCHEDULE_LABEL = "schedule"


def split_schedule(
    settings: Mapping[tuple[str, str, int], list[Record]], metrics: Sequence[Record]
) -> tuple[dict[tuple[str, str, int], list[Record]], list[Record], list[Record], list[Record]]:
    """(fixed settings, fixed metrics, schedule records, schedule metrics)."""
    fixed = {k: v for k, v in settings.items() if k[0] != SCHEDULE_LABEL}
    sched = [r for k, v in settings.items() if k[0] == SCHEDULE_LABEL for r in v]
    m_fixed = [m for m in metrics if m.get("drafter") != SCHEDULE_LABEL]
    m_sched = [m for m in metrics if m.get("drafter") == SCHEDULE_LABEL]
    return fixed, m_fixed, sched, m_sched


def _throughput(metrics: Sequence[Record], c: int) -> float | None:
    vals = [
        float(x)
        for m in metrics
        if concurrency_of(m) == c and (x := m.get("output_tokens_per_s")) and not m.get("partial")
    ]
    return json_num(sum(vals) / len(vals)) if vals else None


def schedule_rows(
    base: Sequence[Record],
    specs: Mapping[int, Sequence[Record]],
    sched: Sequence[Record],
    sched_metrics: Sequence[Record],
    concurrency_rows: Sequence[ConcurrencyRow],
    n_boot: int,
    level: float,
) -> list[MeasuredScheduleRow]:
    """One row per concurrency the schedule was measured at (module docstring)."""
    schedule = next((r.get("schedule") for r in sched if r.get("schedule")), None)
    rows = []
    for c in sorted({concurrency_of(r) for r in sched}):
        s = [r for r in sched if concurrency_of(r) == c]
        b = [r for r in base if concurrency_of(r) == c]
        row_c = next((r for r in concurrency_rows if r.concurrency == c), None)
        best_g, best_tp = None, None
        for g, cell in (row_c.gammas if row_c is not None else {}).items():
            tp = cell.output_tokens_per_s
            if tp is not None and (best_tp is None or tp > best_tp):
                best_g, best_tp = int(g), tp
        tp = _throughput(sched_metrics, c)
        base_tp = row_c.baseline.output_tokens_per_s if row_c is not None else None
        best_recs = [r for r in specs.get(best_g, []) if concurrency_of(r) == c] if best_g else []
        lat = request_latency(s, n_boot, level)
        rows.append(
            MeasuredScheduleRow(
                concurrency=c,
                schedule=schedule,
                n=lat.n,
                tpot_ms=lat.tpot_ms,
                ttft_ms=lat.ttft_ms,
                e2e_ms=lat.e2e_ms,
                output_tokens_per_s=tp,
                speedup=est_model(speedup_of(pair(b, s), n_boot, level)) if b else None,
                throughput_ratio=json_num(tp / base_tp) if tp and base_tp else None,
                best_fixed_gamma=best_g,
                vs_best_fixed=est_model(speedup_of(pair(best_recs, s), n_boot, level))
                if best_recs
                else None,
                paired_throughput_vs_best_fixed=est_model(
                    speedup_of(pair(best_recs, s, end_to_end=True), n_boot, level)
                )
                if best_recs
                else None,
                throughput_vs_best_fixed=json_num(tp / best_tp) if tp and best_tp else None,
            )
        )
    return rows
