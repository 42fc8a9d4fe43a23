"""`specbench predict-check` as one typed request: the two run directories, and the one function
that checks the engine run against the transformers run's batch-size prediction (docs/theory.md
§18; analysis/estimators/prediction_check.py).

    request = PredictCheckRequest(engine_run=..., transformers_run=...)
    outcome = check_runs(request)   # SpecbenchError (exit 2): a run without what the check needs

The fields are the command's arguments under the same names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.analysis.documents.results_model_batch import PredictionCheck


@dataclass(frozen=True, kw_only=True)
class PredictCheckRequest:
    """What `specbench predict-check` was asked: an engine run and a transformers run."""

    engine_run: Path
    transformers_run: Path


@dataclass(frozen=True)
class PredictCheckOutcome:
    """The comparison as the document `--json` prints (its keys in the order built) and typed."""

    document: dict[str, Any]
    check: PredictionCheck


def check_runs(request: PredictCheckRequest) -> PredictCheckOutcome:
    """Both runs' results.json read; the engine run's cells against the prediction. Refuses a
    reference without a prediction, a run that is not an engine run, and no cell in common."""
    from specbench.analysis.estimators.prediction_check import check_prediction
    from specbench.harness.run.rundir import read_results

    engine_run, transformers_run = request.engine_run, request.transformers_run
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
    return PredictCheckOutcome(doc.model_dump(mode="json", by_alias=True), doc)
