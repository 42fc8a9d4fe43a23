"""load_summary.csv (engine runs): one row per workload × temperature × setting × load point of
`engine.load` — the cell's p50 / p90 / p99 of TTFT, TPOT and end-to-end latency with their
interval ends, throughput and SLO goodput. summary.csv keeps its one row per γ; this file is written
only when a run has load cells."""

from __future__ import annotations

from typing import Any

import pandas as pd

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.results_model_base import EstimateJSON

LOAD_CSV = "load_summary.csv"
_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")
_PCTS = ("p50", "p90", "p99")

LOAD_FIELDS = [
    "workload",
    "temperature",
    "gamma",
    "drafter",
    "load",
    "concurrency",
    "effective_concurrency",
    "max_in_flight",
    "offered_rate",
    "n",
    "n_failed",
    "requests_per_s",
    "output_tokens_per_s",
    *[f"{m}_{p}{s}" for m in _METRICS for p in _PCTS for s in ("", "_lo", "_hi")],
    "tpot_meaningless",
    "buffered_requests",
    "hit_bound",
    "not_sent",
    "goodput_requests_per_s",
    "goodput_requests_per_s_lo",
    "goodput_requests_per_s_hi",
    "goodput_tokens_per_s",
    "goodput_share",
    # steady-state cells (load.duration_s / load.requests), empty otherwise
    "steady_duration_s",
    "warmup_excluded_n",
    "warmup_excluded_s",
    "arrival_rate",
    "achieved_rate",
    "kept_up",
]


def _ends(prefix: str, est: EstimateJSON | None) -> dict[str, Any]:
    if est is None:
        return {prefix: None, f"{prefix}_lo": None, f"{prefix}_hi": None}
    return {prefix: est.value, f"{prefix}_lo": est.ci95[0], f"{prefix}_hi": est.ci95[1]}


def load_frame(results: RunResults) -> pd.DataFrame | None:
    rows = []
    for e in results.workloads:
        for c in (e.engine.load if e.engine else None) or []:
            row: dict[str, Any] = {
                "workload": e.workload,
                "temperature": e.temperature,
                **c.model_dump(include=set(LOAD_FIELDS)),
            }
            for m in _METRICS:
                for p in _PCTS:
                    row.update(_ends(f"{m}_{p}", getattr(getattr(c, m), p)))
            gp = c.goodput
            row.update(_ends("goodput_requests_per_s", gp.requests_per_s if gp else None))
            tok = gp.output_tokens_per_s if gp else None
            row["goodput_tokens_per_s"] = tok.value if tok else None
            row["goodput_share"] = gp.share.value if gp else None
            st = c.steady
            row["steady_duration_s"] = st.steady_duration_s if st else None
            row["warmup_excluded_n"] = st.warmup_excluded.n if st else None
            row["warmup_excluded_s"] = st.warmup_excluded.seconds if st else None
            row["arrival_rate"] = st.arrival_rate if st else None
            row["achieved_rate"] = st.achieved_rate if st else None
            row["kept_up"] = st.kept_up if st else None
            rows.append(row)
    return pd.DataFrame(rows, columns=LOAD_FIELDS, dtype=object) if rows else None
