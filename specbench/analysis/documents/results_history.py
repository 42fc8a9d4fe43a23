"""results.json's keys renamed between schema versions, so an older document still reads.

Schema 3 renamed the closed-loop output tokens/s of the γ schedule and of the batch-size
prediction from "goodput" to "throughput": goodput means SLO goodput only (requests meeting
every SLO, as vLLM's benchmark_serving `--goodput` counts them; `results_model_load.Goodput`).
Nothing else changed, so a schema-2 document reads as schema 3 with these keys mapped
(`results_read.check_results`; docs/results.md).

    RENAMED_IN_3["ScheduleRow"]["goodput_tok_s"]  # "throughput_tok_s"
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# model class name → {schema-2 key: schema-3 key}
RENAMED_IN_3: Mapping[str, Mapping[str, str]] = {
    "ScheduleRow": {
        "goodput_ratio": "throughput_ratio",
        "goodput_tok_s": "throughput_tok_s",
        "predicted_goodput_tok_s": "predicted_throughput_tok_s",
    },
    "GammaSchedule": {"goodput": "throughput"},
    "MeasuredScheduleRow": {"goodput_vs_best_fixed": "paired_throughput_vs_best_fixed"},
    "PredictedCell": {"goodput_tokens_per_s": "throughput_tokens_per_s"},
    "CheckedCell": {
        "measured_goodput": "measured_throughput",
        "predicted_goodput": "predicted_throughput",
        "goodput_error": "throughput_error",
    },
    "PredictionCheck": {"median_abs_goodput_error": "median_abs_throughput_error"},
}


def renamed_keys(model: str, data: Mapping[str, Any], schema: Any) -> Mapping[str, Any]:
    """`data` (one object of model `model` in a document of results schema `schema`) with its
    keys of an older schema mapped to the current names; as given when nothing was renamed."""
    renames = RENAMED_IN_3.get(model) if schema == 2 else None
    if not renames or not any(k in data for k in renames):
        return data
    return {renames.get(k, k): v for k, v in data.items()}
