"""The batch-size prediction of a transformers run (`batch_prediction`, docs/theory.md §18)
against an engine run's measurement of the same pair and workloads: per workload × temperature ×
concurrency × γ, the measured throughput (the batch's output tokens/s) and speedup against the engine
without speculation at that concurrency (the throughput ratio), beside the prediction at batch size
= concurrency, and the relative error predicted / measured − 1.

The engines differ (vLLM's kernels and scheduler against the transformers backend's eager
forwards), so absolute throughput does not transfer between them; the speedup ratio, which divides
each engine's own step cost out, is the comparable quantity. Pure: reads two results documents.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from specbench.analysis.documents.results_history import renamed_keys
from specbench.analysis.documents.results_model_batch import CheckedCell, PredictionCheck
from specbench.analysis.stats.serialize import json_num

NOTE = (
    "Absolute throughput differs between engines (vLLM's kernels vs the transformers backend's "
    "eager forwards); the speedup ratio is the comparable quantity. Batch size is taken as the "
    "concurrency, an upper bound: the closed loop's tail runs fewer sequences."
)


def _error(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or measured is None or measured <= 0:
        return None
    return json_num(predicted / measured - 1.0)


def _predicted(
    reference: Mapping[str, Any],
) -> dict[tuple[str, float, int, int], Mapping[str, Any]]:
    """(workload, temperature, b, γ) → the predicted cell (keys of the reference's schema version
    mapped to the current names: a schema-2 reference still reads)."""
    out = {}
    for e in (reference.get("batch_prediction") or {}).get("entries", []):
        for c in (renamed_keys("PredictedCell", c, reference.get("schema")) for c in e["cells"]):
            key = (e["workload"], float(e["temperature"]), int(c["batch_size"]), int(c["gamma"]))
            out[key] = c
    return out


def check_prediction(
    engine: Mapping[str, Any], reference: Mapping[str, Any], reference_run: str
) -> PredictionCheck | None:
    """results.json's `prediction_check` of an engine run (None when the reference has no
    prediction or no cell matches)."""
    predicted = _predicted(reference)
    if not predicted:
        return None
    cells = []
    for e in engine.get("workloads", []):
        eng = e.get("engine")
        if not eng:
            continue
        w, t = e["workload"], float(e["temperature"])
        for row in eng["concurrency"]:
            c = int(row["concurrency"])
            off = row["baseline"].get("output_tokens_per_s")
            measured = {0: (off, 1.0 if off else None)}
            for g, cell in row["gammas"].items():
                measured[int(g)] = (cell.get("output_tokens_per_s"), cell.get("throughput_ratio"))
            for g, (tput, speedup) in sorted(measured.items()):
                p = predicted.get((w, t, c, g))
                if p is None:
                    continue
                p_tput = p["throughput_tokens_per_s"]["value"]
                p_speed = p["speedup_vs_off"]["value"]
                cells.append(
                    CheckedCell(
                        workload=w,
                        temperature=t,
                        concurrency=c,
                        gamma=g,
                        measured_throughput=json_num(tput),
                        predicted_throughput=json_num(p_tput),
                        throughput_error=_error(p_tput, tput),
                        measured_speedup=json_num(speedup),
                        predicted_speedup=json_num(p_speed),
                        speedup_error=_error(p_speed, speedup) if g else None,
                    )
                )
    if not cells:
        return None
    return PredictionCheck(
        reference_run=reference_run,
        cells=cells,
        median_abs_speedup_error=median_abs([c.speedup_error for c in cells]),
        median_abs_throughput_error=median_abs([c.throughput_error for c in cells]),
        note=NOTE,
    )


def median_abs(errors: list[float | None]) -> float | None:
    """The median |error| over the cells that have one (None: no cell has)."""
    vals = [abs(e) for e in errors if e is not None]
    return json_num(statistics.median(vals)) if vals else None
