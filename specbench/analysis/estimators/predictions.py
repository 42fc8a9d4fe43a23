"""The γ table of a results entry, shared by every backend's analysis: for γ = 1..γ_max the
tokens per round ā(γ) and the speedup the one speed model predicts (`analysis.arithmetic.timing_model`;
docs/theory.md §3–4) from each acceptance model ("iid": α per prompt; "empirical": the
truncation curve), beside what was measured at the γ run; each model's error against the
measured speedups, and the better-validated model's optimum over every γ (a suggestion to
measure)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench.analysis.arithmetic.timing_model import TimingModel
from specbench.analysis.estimators.entry_warnings import few_tokens_per_round
from specbench.analysis.estimators.latency import measured_latency
from specbench.analysis.stats.serialize import EstimateDoc, json_num
from specbench.record_line import RecordLine

MODELS = ("iid", "empirical")


@dataclass(frozen=True)
class GammaAcceptance:
    """A measured γ's acceptance columns, from the backend's own estimators (JSON-ready;
    None where the backend cannot measure it), and its mean tokens per round for the warning."""

    alpha_exact_beta: EstimateDoc | None
    accepted_proposed: EstimateDoc | None
    mean_tokens_per_round: EstimateDoc | None
    t_verify_ms_median: float | None
    peak_memory_mb: float | None
    tokens_per_round: float | None


def predicted_speedup(model: TimingModel, gamma: int, tokens: float | None) -> float | None:
    """T_ar / ITL_eff(γ), None where ā(γ) or a cost is unknown or the round time is not
    positive (a fit extrapolated below zero)."""
    if tokens is None or not math.isfinite(tokens) or not model.finite:
        return None
    if model.round_ms(gamma) <= 0:
        return None
    return json_num(model.speedup(gamma, tokens))


def add_prediction_errors(
    errors: dict[str, list[float]], row: dict[str, Any], measured: float | None
) -> None:
    """Append each model's relative error (predicted / measured − 1) for one measured γ row."""
    if not measured:
        return
    for model in MODELS:
        pred = row["predicted_speedup"][model]
        if pred is not None:
            errors[model].append((pred - measured) / measured)


def gamma_table(
    out: dict[str, Any],
    gamma_max: int,
    curves: Mapping[str, Mapping[int, float]],
    model: TimingModel,
    base: list[RecordLine],
    specs: Mapping[int, list[RecordLine]],
    acceptance: Callable[[int], GammaAcceptance],
    n_boot: int,
    level: float,
) -> list[str]:
    """Store `out["gammas"]`, `prediction_error` and `model_optimum` for γ = 1..γ_max; `curves`
    holds ā(γ) per model, `specs` the measured γ runs (paired with `base` for the speedups).
    Returns the warnings (a measured γ with few tokens per round)."""
    warnings: list[str] = []
    rows = []
    errors: dict[str, list[float]] = {m: [] for m in MODELS}
    for g in range(1, gamma_max + 1):
        tokens = {m: curves[m].get(g) for m in MODELS}
        row: dict[str, Any] = {
            "gamma": g,
            "measured": bool(specs.get(g)),
            "predicted_tokens_per_round": {m: json_num(tokens[m]) for m in MODELS},
            "predicted_speedup": {m: predicted_speedup(model, g, tokens[m]) for m in MODELS},
            "measured_speedup": None,
        }
        if row["measured"]:
            acc = acceptance(g)
            latency = measured_latency(base, specs[g], n_boot, level)
            row.update(
                {
                    "alpha_exact_beta": acc.alpha_exact_beta,
                    "accepted_proposed": acc.accepted_proposed,
                    "mean_tokens_per_round": acc.mean_tokens_per_round,
                    "t_verify_ms_median": acc.t_verify_ms_median,
                    **latency,
                    "peak_memory_mb": acc.peak_memory_mb,
                }
            )
            if (few := few_tokens_per_round(g, acc.tokens_per_round)) is not None:
                warnings.append(few)
            add_prediction_errors(errors, row, (latency["measured_speedup"] or {}).get("value"))
        rows.append(row)
    store_gamma_rows(out, rows, errors)
    return warnings


def store_gamma_rows(
    out: dict[str, Any], rows: list[dict[str, Any]], errors: dict[str, list[float]]
) -> None:
    """Store the γ rows, each model's prediction error and the better-validated model's optimum
    over every γ (a suggestion to measure)."""
    out["gammas"] = rows
    out["prediction_error"] = {
        m: {"mean_abs_rel": json_num(float(np.mean(np.abs(v)))) if v else None, "n": len(v)}
        for m, v in errors.items()
    }
    better = min(
        MODELS,
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
