"""Report sections of docs/theory.md §18: "predicted throughput by batch size" (a transformers run
with `batch_timing`) and "prediction against the engine" (an engine run compared with such a
prediction). Both return nothing for a run without them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specbench.analysis.documents.results_model import RunResults
from specbench.analysis.documents.results_model_base import EstimateJSON
from specbench.analysis.documents.results_model_batch import PredictionCheck
from specbench.report.render.blocks import Block, Heading, Para, TableBlock
from specbench.report.sections.no_verdict import shows_speedup
from specbench.report.sections.text import num_text

if TYPE_CHECKING:
    from rich.console import Console


def _est(e: EstimateJSON | None, fmt: str) -> str:
    if e is None or e.value is None:
        return "–"
    lo, hi = e.ci95
    if lo is None or hi is None:
        return fmt.format(e.value)
    return f"{fmt.format(e.value)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.0f} %"


def _abs_pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.0f} %"


def batch_prediction_blocks(results: RunResults) -> list[Block]:
    pred = results.batch_prediction
    if pred is None or not pred.entries:
        return []
    blocks: list[Block] = [
        Heading("Predicted throughput by batch size"),
        Para(
            "A **prediction**, not a measurement: the batched forwards were timed here "
            "(verify over b rows of γ + 1 tokens, the draft over b rows) and combined with the "
            "per-prompt acceptance of the batch-1 run; no engine ran these batches. throughput(b, γ) "
            "= b · ā(γ) / (γ·T_d(b) + T_t(b, γ)); the interval resamples prompts, the timings "
            "are taken as exact (docs/theory.md §18)."
        ),
    ]
    verdictless = {(w.workload, w.temperature) for w in results.workloads if not shows_speedup(w)}
    for e in pred.entries:
        speedups = (e.workload, e.temperature) not in verdictless  # no speedup without a verdict
        best = ", ".join(f"b={b}: {'off' if g == 0 else f'γ={g}'}" for b, g in e.best_gamma.items())
        blocks.append(Heading(f"{e.workload} T={e.temperature:g}", 3))
        blocks.append(
            Para(
                f"KV cache of {e.context_len} positions per row, {e.repeats} repetitions, "
                f"ā(γ) by truncation of the γ={e.gamma_max} run over {e.prompts} prompts. "
                f"Highest predicted throughput: {best}."
            )
        )
        rows = [
            [
                str(c.batch_size),
                "off" if c.gamma == 0 else str(c.gamma),
                num_text(c.step_ms, "{:.2f}"),
                _est(c.tokens_per_step, "{:.2f}"),
                _est(c.throughput_tokens_per_s, "{:.0f}"),
                *([_est(c.speedup_vs_off, "{:.2f}")] if speedups else []),
            ]
            for c in e.cells
        ]
        header = ["b", "γ", "step ms", "ā per step", "throughput tok/s"]
        blocks.append(TableBlock(header + (["speedup vs off"] if speedups else []), rows))
    return blocks


def prediction_check_rows(check: PredictionCheck) -> list[list[str]]:
    return [
        [
            c.workload,
            f"{c.temperature:g}",
            str(c.concurrency),
            str(c.gamma),
            num_text(c.measured_throughput, "{:.0f}"),
            num_text(c.predicted_throughput, "{:.0f}"),
            _pct(c.throughput_error),
            num_text(c.measured_speedup, "{:.2f}"),
            num_text(c.predicted_speedup, "{:.2f}"),
            _pct(c.speedup_error),
        ]
        for c in check.cells
    ]


# the console's narrower header, same columns
PREDICTION_CHECK_SHORT = [
    "workload",
    "T",
    "c",
    "γ",
    "tok/s",
    "pred",
    "err",
    "speedup",
    "pred",
    "err",
]
PREDICTION_CHECK_HEADER = [
    "workload",
    "T",
    "concurrency",
    "γ",
    "throughput measured",
    "predicted",
    "error",
    "speedup measured",
    "predicted",
    "error",
]


def prediction_check_blocks(results: RunResults) -> list[Block]:
    check = results.prediction_check
    if check is None or not check.cells:
        return []
    return [
        Heading("Prediction against the engine"),
        Para(
            f"The transformers run {check.reference_run} predicted each cell from its batched "
            f"timings (batch size = concurrency). {check.note} Median |error|: speedup "
            f"{_abs_pct(check.median_abs_speedup_error)}, throughput "
            f"{_abs_pct(check.median_abs_throughput_error)}."
        ),
        TableBlock(PREDICTION_CHECK_HEADER, prediction_check_rows(check)),
    ]


def render_prediction_check(console: Console, check: PredictionCheck) -> None:
    """`specbench predict-check` on the console: the cells, the note, the median errors."""
    from rich.table import Table

    from specbench.report.render.terminal import table_box

    table = Table(
        title="measured (engine) vs predicted (transformers): throughput tok/s, speedup vs off; "
        "error = predicted / measured − 1",
        title_justify="left",
        box=table_box(),
    )
    for col in PREDICTION_CHECK_SHORT:
        table.add_column(col, justify="left" if col == "workload" else "right")
    for row in prediction_check_rows(check):
        table.add_row(*row)
    console.print(table)
    console.print(check.note)
    med_s, med_g = check.median_abs_speedup_error, check.median_abs_throughput_error
    console.print(
        "median |error|: speedup "
        + ("–" if med_s is None else f"{med_s * 100:.0f} %")
        + ", throughput "
        + ("–" if med_g is None else f"{med_g * 100:.0f} %")
    )


def schedule_blocks(results: RunResults) -> list[Block]:
    """vLLM runs with `speculative.schedule`: the schedule against off and the best fixed γ at
    every concurrency (paired decode speedups, output tokens/s)."""
    blocks: list[Block] = []
    for e in results.workloads:
        rows = e.engine.measured_schedule if e.engine is not None else None
        if not rows or not shows_speedup(e):  # a cell without a verdict shows no speedup
            continue
        if not blocks:
            blocks.append(Heading("The γ schedule against fixed γ"))
        blocks.append(Heading(f"{e.workload} T={e.temperature:g}: schedule {rows[0].schedule}", 3))
        blocks.append(
            TableBlock(
                [
                    "concurrency",
                    "tok/s",
                    "speedup vs off",
                    "tok/s ÷ off",
                    "best fixed γ",
                    "speedup vs best fixed",
                    "throughput ÷ best fixed",
                    "tok/s ÷ best fixed",
                ],
                [
                    [
                        str(r.concurrency),
                        num_text(r.output_tokens_per_s, "{:.0f}"),
                        _est(r.speedup, "{:.2f}"),
                        num_text(r.throughput_ratio, "{:.2f}"),
                        "–" if r.best_fixed_gamma is None else str(r.best_fixed_gamma),
                        _est(r.vs_best_fixed, "{:.2f}"),
                        _est(r.paired_throughput_vs_best_fixed, "{:.2f}"),
                        num_text(r.throughput_vs_best_fixed, "{:.2f}"),
                    ]
                    for r in rows
                ],
            )
        )
    return blocks
