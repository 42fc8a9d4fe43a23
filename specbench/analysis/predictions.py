"""Prediction rows shared by every backend's analysis: each model's error against the measured
speedups, and the better-validated model's optimum over every γ (a suggestion to measure)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from specbench.analysis.serialize import json_num


def add_prediction_errors(
    errors: dict[str, list[float]], row: dict[str, Any], measured: float | None
) -> None:
    """Append each model's relative error (predicted / measured − 1) for one measured γ row."""
    if not measured:
        return
    for model in ("iid", "empirical"):
        pred = row["predicted_speedup"][model]
        if pred is not None:
            errors[model].append((pred - measured) / measured)


def store_gamma_rows(
    out: dict[str, Any], rows: list[dict[str, Any]], errors: dict[str, list[float]]
) -> None:
    """Store the γ rows, each model's prediction error and the better-validated model's optimum
    over every γ (a suggestion to measure) — shared by every backend's analysis."""
    out["gammas"] = rows
    out["prediction_error"] = {
        m: {"mean_abs_rel": json_num(float(np.mean(np.abs(v)))) if v else None, "n": len(v)}
        for m, v in errors.items()
    }
    better = min(
        ("iid", "empirical"),
        key=lambda m: (
            out["prediction_error"][m]["mean_abs_rel"]
            if out["prediction_error"][m]["mean_abs_rel"] is not None
            else math.inf
        ),
    )
    predicted = [r for r in rows if r["predicted_speedup"][better] is not None]
    best = max(predicted, key=lambda r: r["predicted_speedup"][better], default=None)
    out["model_optimum"] = (
        {
            "gamma": best["gamma"],
            "predicted_speedup": best["predicted_speedup"][better],
            "model": better,
        }
        if best is not None
        else None
    )
