"""Rendering of `specbench simulate`: one table per workload × temperature × drafter."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.simulation_model import Simulation
from specbench.report.render.terminal import compact_box
from specbench.report.sections.text import num_text


def _speedup(e: EstimateJSON | None) -> str:
    """ "1.81× 1.75–1.88": a speedup and its interval, compact (the table must fit 80 columns)."""
    if e is None or e.value is None:
        return "–"
    lo, hi = e.ci95
    if lo is None and hi is None:
        return f"{e.value:.2f}×"
    return f"{e.value:.2f}× {num_text(lo, '{:.2f}')}–{num_text(hi, '{:.2f}')}"


def _value(e: EstimateJSON | None) -> str:
    return num_text(e.value if e is not None else None, "{:.2f}")


_LEGEND = (
    "  max: the policy's largest γ; ā: tokens per round; sim: replayed over the trace, run: as "
    "measured at that setting; speedup with its interval (ā's intervals are in "
    "simulation.json); error: sim vs run speedup."
)


def render_simulation(console: Console, results: list[Simulation]) -> None:
    """One table per workload × temperature × drafter, one line per policy at 80 columns."""
    for entry in results:
        table = Table(
            title=f"{entry.workload} T={entry.temperature:g}, drafter {entry.drafter} "
            f"(trace at γ={entry.trace_gamma})",
            title_justify="left",
            box=compact_box(console),
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
        )
        table.add_column("policy", overflow="fold")
        for col in ("max", "mean\nγ", "ā\nsim", "speedup\nsim", "ā\nrun", "speedup\nrun", "error"):
            table.add_column(col, justify="right", no_wrap=True)
        for row in entry.policies:
            err = row.speedup_error
            table.add_row(
                row.policy,
                str(row.gamma),
                f"{row.mean_gamma:.2f}",
                _value(row.predicted_tokens_per_round),
                _speedup(row.predicted_speedup),
                _value(row.measured_tokens_per_round),
                _speedup(row.measured_speedup),
                "–" if err is None else f"{err:+.1%}",
            )
        console.print(table)
        if entry.not_replayed:
            console.print(
                f"not replayed (beyond the trace's γ={entry.trace_gamma}): "
                + ", ".join(entry.not_replayed)
            )
    if results:
        console.print(_LEGEND, markup=False, highlight=False)
