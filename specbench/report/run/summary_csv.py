"""summary.csv: one row per workload × temperature × γ of the γ table, from the typed results.

A cell without a verdict (NOT MEASURED) leaves its speedup columns empty (`no_verdict`).

A pandas DataFrame of object columns, so each value is written as Python prints it (as the csv
module did before; None is an empty cell) and the file stays byte-identical across versions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from specbench.analysis.documents.results_model import RunResults
from specbench.report.sections.no_verdict import shows_speedup

CSV_FIELDS = [
    "workload",
    "temperature",
    "gamma",
    "measured",
    "alpha",
    "alpha_lo",
    "alpha_hi",
    "mean_tokens_per_round",
    "itl_ms",
    "baseline_itl_ms",
    "measured_speedup",
    "measured_speedup_lo",
    "measured_speedup_hi",
    "predicted_speedup_iid",
    "predicted_speedup_empirical",
    "recommended",
    "verdict",
    "prompts",
    "n_prompts",
]


def summary_frame(results: RunResults) -> pd.DataFrame:
    """One row per γ of each entry's γ table, with the entry's α, the row's measured and
    predicted speedups, whether it is the recommended γ, and the prompts the row covers."""
    rows = []
    for e in results.workloads:
        rec = e.recommendation
        alpha_ci = e.alpha.ci95 if e.alpha else (None, None)
        # which prompts the row's figures cover (docs/theory.md §13; older results: every one)
        basis = e.figures_basis
        prompts = basis.prompts if basis is not None else "all"
        n_prompts = basis.n_prompts if basis is not None else e.n_prompts
        speedups = shows_speedup(e)  # a cell without a verdict: its speedup columns empty
        for g in e.gammas:
            ms = g.measured_speedup if speedups else None
            ms_ci = ms.ci95 if ms else (None, None)
            pred = g.predicted_speedup if speedups else None
            rows.append(
                {
                    "workload": e.workload,
                    "temperature": e.temperature,
                    "gamma": g.gamma,
                    "measured": int(g.measured),
                    "alpha": e.alpha.value if e.alpha else None,
                    "alpha_lo": alpha_ci[0],
                    "alpha_hi": alpha_ci[1],
                    "mean_tokens_per_round": _value(g.mean_tokens_per_round),
                    "itl_ms": _value(g.itl_ms),
                    "baseline_itl_ms": _value(e.baseline_itl_ms),
                    "measured_speedup": ms.value if ms else None,
                    "measured_speedup_lo": ms_ci[0],
                    "measured_speedup_hi": ms_ci[1],
                    "predicted_speedup_iid": pred.iid if pred else None,
                    "predicted_speedup_empirical": pred.empirical if pred else None,
                    "recommended": int(rec.verdict == "on" and rec.gamma == g.gamma),
                    "verdict": rec.verdict,
                    "prompts": prompts,
                    "n_prompts": n_prompts,
                }
            )
    return pd.DataFrame(rows, columns=CSV_FIELDS, dtype=object)


def _value(est: Any) -> float | None:
    return est.value if est is not None else None


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    frame.to_csv(path, index=False, na_rep="", lineterminator="\r\n")
