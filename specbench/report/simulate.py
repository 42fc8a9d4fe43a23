"""Rendering of `specbench simulate`: one table per workload × temperature × drafter."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from specbench.analysis.results_model_base import EstimateJSON
from specbench.report.text import ci_text


def _ci(est: dict[str, Any] | None, fmt: str) -> str:
    """An `analysis.simulate` estimate ({value, ci95}, as in results.json) as "value [lo, hi]"."""
    return ci_text(EstimateJSON.model_validate(est) if est is not None else None, fmt)


def render_simulation(console: Console, results: list[dict[str, Any]]) -> None:
    for entry in results:
        table = Table(
            title=f"{entry['workload']} T={entry['temperature']:g}, drafter {entry['drafter']} "
            f"(trace at γ={entry['trace_gamma']})",
            title_justify="left",
        )
        for col in (
            "policy",
            "max γ",
            "mean γ",
            "tokens/round (sim)",
            "speedup (sim)",
            "tokens/round (run)",
            "speedup (run)",
            "error",
        ):
            table.add_column(col, justify="left" if col == "policy" else "right")
        for row in entry["policies"]:
            err = row.get("speedup_error")
            table.add_row(
                row["policy"],
                str(row["gamma"]),
                f"{row['mean_gamma']:.2f}",
                _ci(row["predicted_tokens_per_round"], "{:.2f}"),
                _ci(row["predicted_speedup"], "{:.2f}×"),
                _ci(row["measured_tokens_per_round"], "{:.2f}"),
                _ci(row["measured_speedup"], "{:.2f}×"),
                "–" if err is None else f"{err:+.1%}",
            )
        console.print(table)
        if entry.get("not_replayed"):
            console.print(
                f"not replayed (beyond the trace's γ={entry['trace_gamma']}): "
                + ", ".join(entry["not_replayed"])
            )
