"""`specbench predict-check ENGINE_RUN TRANSFORMERS_RUN`: an engine run's measured throughput and
speedup per concurrency × γ against the batch-size prediction of a transformers run with
`batch_timing` (docs/theory.md §18; the speedup ratio is the comparable quantity).

    specbench predict-check reports/tiny-vllm-load reports/tiny-load
    specbench predict-check reports/tiny-vllm-load reports/tiny-load --json

Reads the two runs' results.json (no model is loaded, torch is not imported). An engine run whose
`conformance.reference_run` is the transformers run shows the same table in its report.

The arguments become one typed request (harness/compare/predict_check_request.py: `PredictCheckRequest`,
checked by `check_runs`); report/batch_sections.py renders the comparison.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from specbench.cli.options import JsonOption


def predict_check(
    engine_run: Annotated[
        Path, typer.Argument(help="A run directory of `backend: vllm` or `openai`.")
    ],
    transformers_run: Annotated[
        Path, typer.Argument(help="A transformers run directory made with `batch_timing`.")
    ],
    as_json: JsonOption = False,
) -> None:
    """Compare an engine run with a transformers run's predicted throughput by batch size."""
    from specbench.harness.compare.predict_check_request import PredictCheckRequest, check_runs
    from specbench.report.run.console import make_console
    from specbench.report.sections.batch_sections import render_prediction_check

    outcome = check_runs(
        PredictCheckRequest(engine_run=engine_run, transformers_run=transformers_run)
    )
    if as_json:
        typer.echo(json.dumps(outcome.document, indent=2))
        return
    render_prediction_check(make_console(), outcome.check)
