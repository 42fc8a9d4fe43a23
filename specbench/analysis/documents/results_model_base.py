"""The building blocks of the results.json models (`analysis.documents.results_model`): an estimate with
its interval, a setting, a prediction under both models, latency percentiles."""

from __future__ import annotations

from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, ValidationInfo, model_validator

from specbench.analysis.documents.results_history import renamed_keys
from specbench.analysis.stats.resampling import Estimate
from specbench.analysis.stats.serialize import json_num

Verdict = Literal["on", "off", "undecided", "not_measured"]
Num = float | None
Interval = tuple[Num, Num]


class ResultsModel(BaseModel):
    """The base of every results.json model: an unknown key is an error (a renamed key in the
    analysis fails validation instead of rendering as "–"). A document of an older schema
    version, validated with context {"schema": its version}, has its renamed keys mapped first
    (`results_history`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _older_schema_keys(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict) and info.context:
            return renamed_keys(cls.__name__, data, info.context.get("schema"))
        return data


# --- building blocks --------------------------------------------------------------------------


class EstimateJSON(ResultsModel):
    """A point estimate with its interval at the run's ci_level (named ci95 for history); either
    end is null where no honest bound exists at this sample size (docs/theory.md §7)."""

    value: Num
    ci95: Interval


@overload
def est_model(e: Estimate) -> EstimateJSON: ...
@overload
def est_model(e: None) -> None: ...
@overload
def est_model(e: Estimate | None) -> EstimateJSON | None: ...
def est_model(e: Estimate | None) -> EstimateJSON | None:
    """An estimate as results.json holds it (`stats.serialize.est_json`'s rounding: 6 digits,
    NaN and ±inf as null), built as the model."""
    if e is None:
        return None
    return EstimateJSON(value=json_num(e.value), ci95=(json_num(e.lo), json_num(e.hi)))


class AlphaJSON(EstimateJSON):
    """The headline α and the estimator behind it (docs/theory.md §2)."""

    estimator: Literal["exact_beta", "accepted_tested"]


class ModelPair(ResultsModel):
    """One figure under both prediction models of ā(γ) (docs/theory.md §3)."""

    iid: Num
    empirical: Num


class SettingLabel(ResultsModel):
    drafter: str
    policy: str
    gamma: int


class SettingSpeedup(SettingLabel):
    """A measured setting with its speedup (and, where the rule computed it, its simultaneous
    lower bound)."""

    speedup: EstimateJSON | None
    decision_lower_bound: Num = None
    decision_upper_bound: Num = None  # the OFF test's bound (docs/theory.md §8)


class DecisionNumbers(ResultsModel):
    """What every verdict states beside its outcome (docs/theory.md §8): the prompts it rests on,
    Kish's effective number of them, the fewest prompts the test can decide with, the speedup it
    detects with 80 % power (None: unbounded), and for UNDECIDED the prompts that would likely
    settle it (None: not within 10,000)."""

    n_prompts: int | None = None
    n_eff: Num = None
    min_prompts: int | None = None
    detectable_speedup: Num = None
    prompts_needed: int | None = None
    false_off_rate: Num = None


class ModelOptimum(ResultsModel):
    gamma: int
    predicted_speedup: Num
    model: Literal["iid", "empirical"]


class Percentiles(ResultsModel):
    """p50 / p90 / p99, each null below the requests it needs (`analysis.serving.serving_cost`)."""

    p50: Num
    p90: Num
    p99: Num


class LatencyTails(ResultsModel):
    n: int
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    e2e_ms: Percentiles
