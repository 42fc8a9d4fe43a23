"""A cell without a verdict shows no speedup anywhere (issue 32 item 7, docs/theory.md §13): a
cell NOT MEASURED (too few non-degenerate answers, or no speculative measurement) keeps its raw
measurements — tokens per round, ITL, each arm's TPOT and tokens/s, latency tails — but no
measured or predicted speedup, throughput ratio, γ schedule or speedup plot.
UNDECIDED and OFF cells have a verdict: their speedups stay, labelled "not a result" where they
are shown beside a verdict (`text.shown_setting`)."""

from __future__ import annotations

from specbench.analysis.documents.results_model_workload import WorkloadResult


def shows_speedup(e: WorkloadResult) -> bool:
    """Whether any table or plot of the cell may show a speedup or a ratio to the baseline."""
    return e.recommendation.verdict != "not_measured"


def no_speedup_note(e: WorkloadResult, what: str) -> str | None:
    """The one sentence a table of a cell without a verdict carries in place of its speedups;
    None for a cell with a verdict."""
    if shows_speedup(e):
        return None
    return (
        f"Not measured, so no verdict: the {what} shows no speedup or ratio to the baseline, "
        "only the raw measurements."
    )
