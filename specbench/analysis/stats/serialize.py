"""JSON-ready numbers: finite floats rounded to 6 digits, None for NaN/inf (results.json and the
commands' `--json` documents hold no non-standard `NaN`)."""

from __future__ import annotations

import math
from typing import Any, TypedDict

from specbench.analysis.stats.resampling import Estimate


class EstimateDoc(TypedDict):
    """An estimate as results.json holds it (`documents.results_model_base.EstimateJSON`)."""

    value: float | None
    ci95: list[float | None]


def json_num(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), 6)


def est_json(e: Estimate | None) -> EstimateDoc | None:
    """{"value": v, "ci95": [lo, hi]} (the interval at the run's ci_level, named ci95 for history)."""
    if e is None:
        return None
    return {"value": json_num(e.value), "ci95": [json_num(e.lo), json_num(e.hi)]}


def json_safe(obj: Any) -> Any:
    """JSON-safe copy: non-finite floats become null (dicts, lists and tuples walked)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj
