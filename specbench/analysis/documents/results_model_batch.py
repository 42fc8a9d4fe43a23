"""results.json's `batch_prediction` (transformers runs with `batch_timing`) and
`prediction_check` (engine runs compared with such a prediction): docs/theory.md §18."""

from __future__ import annotations

from typing import Literal

from specbench.analysis.documents.results_model_base import EstimateJSON, Num, ResultsModel


class PredictedCell(ResultsModel):
    """One batch size × γ (0 = off): the timed step and the predicted throughput."""

    batch_size: int
    gamma: int
    draft_ms: float
    verify_ms: float
    step_ms: float
    tokens_per_step: EstimateJSON  # ā_pool(γ) per sequence
    throughput_tokens_per_s: EstimateJSON
    speedup_vs_off: EstimateJSON


class PredictionEntry(ResultsModel):
    workload: str
    temperature: float
    gamma_max: int
    context_len: int
    repeats: int
    prompts: int
    cells: list[PredictedCell]
    best_gamma: dict[str, int]  # batch size → γ with the highest predicted throughput (0 = off)


class BatchPrediction(ResultsModel):
    kind: Literal["prediction"]
    basis: str
    entries: list[PredictionEntry]


class CheckedCell(ResultsModel):
    """One engine cell (workload × temperature × concurrency × γ) against the prediction at
    batch size = concurrency."""

    workload: str
    temperature: float
    concurrency: int
    gamma: int
    measured_throughput: Num
    predicted_throughput: Num
    throughput_error: Num  # predicted / measured − 1
    measured_speedup: Num
    predicted_speedup: Num
    speedup_error: Num  # predicted / measured − 1 (the comparable one across engines)


class PredictionCheck(ResultsModel):
    reference_run: str
    cells: list[CheckedCell]
    median_abs_speedup_error: Num
    median_abs_throughput_error: Num
    note: str
