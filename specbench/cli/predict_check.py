"""`specbench predict-check ENGINE_RUN TRANSFORMERS_RUN`: an engine run's measured throughput and
speedup per concurrency × γ against the batch-size prediction of a transformers run with
`batch_timing` (docs/theory.md §18; the speedup ratio is the comparable quantity).

    specbench predict-check reports/tiny-vllm-load reports/tiny-load
    specbench predict-check reports/tiny-vllm-load reports/tiny-load --json

Reads the two runs' results.json (no model is loaded, torch is not imported). An engine run whose
`conformance.reference_run` is the transformers run shows the same table in its report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from specbench.errors import SpecbenchError


def predict_check(
    engine_run: Annotated[
        Path, typer.Argument(help="A run directory of `backend: vllm` or `openai`.")
    ],
    transformers_run: Annotated[
        Path, typer.Argument(help="A transformers run directory made with `batch_timing`.")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the comparison as JSON instead of a table.")
    ] = False,
) -> None:
    """Compare an engine run with a transformers run's predicted throughput by batch size."""
    from specbench.analysis.documents.results_model_batch import PredictionCheck
    from specbench.analysis.estimators.prediction_check import check_prediction
    from specbench.harness.run.rundir import read_results
    from specbench.report.run.console import make_console, table_box
    from specbench.report.sections.batch_sections import (
        PREDICTION_CHECK_SHORT,
        prediction_check_rows,
    )

    engine, reference = read_results(engine_run), read_results(transformers_run)
    if not reference.get("batch_prediction"):
        raise SpecbenchError(
            f"{transformers_run} has no batch-size prediction; run it with a `batch_timing:` "
            "section (backend: transformers)"
        )
    if not any(w.get("engine") for w in engine.get("workloads", [])):
        raise SpecbenchError(f"{engine_run} is not an engine run (backend: vllm or openai)")
    doc = check_prediction(engine, reference, str(transformers_run))
    if doc is None:
        raise SpecbenchError(
            "no cell to compare: the engine run's workloads, temperatures, concurrencies and γ "
            "do not meet the prediction's workloads, temperatures, batch sizes and γ"
        )
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    check = PredictionCheck.model_validate(doc)
    from rich.table import Table

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
    console = make_console()
    console.print(table)
    console.print(check.note)
    med_s, med_g = check.median_abs_speedup_error, check.median_abs_throughput_error
    console.print(
        "median |error|: speedup "
        + ("–" if med_s is None else f"{med_s * 100:.0f} %")
        + ", throughput "
        + ("–" if med_g is None else f"{med_g * 100:.0f} %")
    )
