"""The γ table of a results entry, shared by every backend's analysis: for γ = 1..γ_max the
tokens per round ā(γ) and the speedup the one speed model predicts (`analysis.arithmetic.timing_model`;
docs/theory.md §3–4) from each acceptance model ("iid": α per prompt; "empirical": the
truncation curve), beside what was measured at the γ run; each model's error against the
measured speedups, and the better-validated model's optimum over every γ (a suggestion to
measure)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specbench.analysis.arithmetic.timing_model import TimingModel
from specbench.analysis.documents.results_model_base import EstimateJSON, ModelOptimum, ModelPair
from specbench.analysis.documents.results_model_workload import (
    GammaRow,
    PredictionError,
    PredictionErrors,
)
from specbench.analysis.estimators.entry_warnings import few_tokens_per_round
from specbench.analysis.estimators.latency import measured_latency
from specbench.analysis.stats.serialize import json_num
from specbench.record_line import RecordLine

Model = Literal["iid", "empirical"]
MODELS: tuple[Model, ...] = ("iid", "empirical")


@dataclass(frozen=True)
class GammaAcceptance:
    """A measured γ's acceptance columns, from the backend's own estimators (None where the
    backend cannot measure it), and its mean tokens per round for the warning."""

    alpha_exact_beta: EstimateJSON | None
    accepted_proposed: EstimateJSON | None
    mean_tokens_per_round: EstimateJSON | None
    t_verify_ms_median: float | None
    peak_memory_mb: float | None
    tokens_per_round: float | None


@dataclass(frozen=True)
class GammaTable:
    """An entry's γ table: the rows γ = 1..γ_max, each model's error against the measured
    speedups, the better-validated model's optimum, and the warnings met (few tokens per round)."""

    rows: list[GammaRow]
    prediction_error: PredictionErrors
    model_optimum: ModelOptimum | None
    warnings: list[str]


def predicted_speedup(model: TimingModel, gamma: int, tokens: float | None) -> float | None:
    """T_ar / ITL_eff(γ), None where ā(γ) or a cost is unknown or the round time is not
    positive (a fit extrapolated below zero)."""
    if tokens is None or not math.isfinite(tokens) or not model.finite:
        return None
    if model.round_ms(gamma) <= 0:
        return None
    return json_num(model.speedup(gamma, tokens))


def of_model(pair: ModelPair, model: Model) -> float | None:
    """The figure of `pair` under `model`."""
    return pair.iid if model == "iid" else pair.empirical


def prediction_errors(rows: Sequence[GammaRow]) -> PredictionErrors:
    """Each model's mean absolute relative error (predicted / measured − 1) over the measured γ
    rows with a speedup, and how many rows it rests on."""

    def error(model: Model) -> PredictionError:
        errs = [
            (pred - m.value) / m.value
            for r in rows
            if (m := r.measured_speedup) is not None and m.value
            if (pred := of_model(r.predicted_speedup, model)) is not None
        ]
        mean = json_num(float(np.mean(np.abs(errs)))) if errs else None
        return PredictionError(mean_abs_rel=mean, n=len(errs))

    return PredictionErrors(iid=error("iid"), empirical=error("empirical"))


def model_optimum(rows: Sequence[GammaRow], errors: PredictionErrors) -> ModelOptimum | None:
    """The better-validated model's (the smaller mean error; iid on a tie or without any) γ of
    the highest predicted speedup over every γ: a suggestion to measure."""
    mean = {"iid": errors.iid.mean_abs_rel, "empirical": errors.empirical.mean_abs_rel}
    better = min(MODELS, key=lambda m: v if (v := mean[m]) is not None else math.inf)
    predicted = [
        (r.gamma, s) for r in rows if (s := of_model(r.predicted_speedup, better)) is not None
    ]
    best = max(predicted, key=lambda gs: gs[1], default=None)
    if best is None:
        return None
    return ModelOptimum(gamma=best[0], predicted_speedup=best[1], model=better)


def gamma_table(
    gamma_max: int,
    curves: Mapping[str, Mapping[int, float]],
    model: TimingModel,
    base: list[RecordLine],
    specs: Mapping[int, list[RecordLine]],
    acceptance: Callable[[int], GammaAcceptance],
    n_boot: int,
    level: float,
) -> GammaTable:
    """The γ table for γ = 1..γ_max; `curves` holds ā(γ) per model, `specs` the measured γ runs
    (paired with `base` for the speedups)."""
    warnings: list[str] = []
    rows = []
    for g in range(1, gamma_max + 1):
        tokens = {m: curves[m].get(g) for m in MODELS}
        tokens_pair = ModelPair(
            iid=json_num(tokens["iid"]), empirical=json_num(tokens["empirical"])
        )
        speedup_pair = ModelPair(
            iid=predicted_speedup(model, g, tokens["iid"]),
            empirical=predicted_speedup(model, g, tokens["empirical"]),
        )
        if not specs.get(g):
            rows.append(
                GammaRow(
                    gamma=g,
                    measured=False,
                    predicted_tokens_per_round=tokens_pair,
                    predicted_speedup=speedup_pair,
                    measured_speedup=None,
                )
            )
            continue
        acc = acceptance(g)
        latency = measured_latency(base, specs[g], n_boot, level)
        rows.append(
            GammaRow(
                gamma=g,
                measured=True,
                predicted_tokens_per_round=tokens_pair,
                predicted_speedup=speedup_pair,
                measured_speedup=latency.measured_speedup,
                alpha_exact_beta=acc.alpha_exact_beta,
                accepted_proposed=acc.accepted_proposed,
                mean_tokens_per_round=acc.mean_tokens_per_round,
                t_verify_ms_median=acc.t_verify_ms_median,
                itl_ms=latency.itl_ms,
                tokens_per_s=latency.tokens_per_s,
                measured_e2e_speedup=latency.measured_e2e_speedup,
                peak_memory_mb=acc.peak_memory_mb,
            )
        )
        if (few := few_tokens_per_round(g, acc.tokens_per_round)) is not None:
            warnings.append(few)
    errors = prediction_errors(rows)
    return GammaTable(rows, errors, model_optimum(rows, errors), warnings)
