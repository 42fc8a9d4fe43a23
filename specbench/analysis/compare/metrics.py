"""What `specbench compare` judges: the row statuses, the metrics with their direction and minimum
effect, and `Thresholds` (the `--thresholds` YAML keys). docs/compare.md states the defaults and
where the run-to-run CVs were measured."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

IMPROVED = "improved"
REGRESSED = "regressed"
UNCHANGED = "unchanged"
NOT_SIGNIFICANT = "not significant"
NOT_COMPARABLE = "not comparable"
INFORMATIONAL = "informational"
STATUSES = (REGRESSED, IMPROVED, NOT_SIGNIFICANT, NOT_COMPARABLE, INFORMATIONAL, UNCHANGED)

ACCEPTANCE, SPEEDUP, TIMING = "acceptance", "speedup", "timing"
CODE, ENV = "code", "env"  # what the comparison is about (`subject`)

# Run-to-run coefficient of variation measured on this project's CPU (docs/compare.md §noise):
# `specbench run configs/tiny.yaml` three times, each row's log-speedup difference between runs
# less its per-prompt bootstrap variance (method of moments), pooled over the rows.
RUN_TO_RUN_CV_SPEEDUP = 0.07
RUN_TO_RUN_CV_TIMING = 0.95  # absolute tokens/s moved up to 4× between runs on this shared host


class Thresholds(BaseModel):
    """When a change counts: significance and minimum effects (YAML keys of `--thresholds`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    significance: float = Field(default=0.05, gt=0.0, lt=1.0)
    alpha_drop: float = Field(default=0.02, ge=0.0)  # absolute drop of α (exact β)
    accepted_length_drop: float = Field(default=0.05, ge=0.0)  # relative drop of τ
    speedup_drop: float = Field(default=0.05, ge=0.0)  # relative drop of the measured speedup
    latency_rise: float = Field(default=0.05, ge=0.0)  # relative rise of per-token latency
    throughput_drop: float = Field(default=0.05, ge=0.0)  # relative drop of decode tokens/s
    bootstrap: int = Field(default=2000, ge=200)
    seed: int = 20240101
    # run-to-run noise not visible inside one run (log scale ≈ CV): of the speedup ratio, and of
    # absolute timing (used only when the environment change is the subject)
    run_to_run_cv: float = Field(default=RUN_TO_RUN_CV_SPEEDUP, ge=0.0, le=1.0)
    timing_run_to_run_cv: float = Field(default=RUN_TO_RUN_CV_TIMING, ge=0.0, le=1.0)
    power: float = Field(default=0.8, gt=0.5, lt=1.0)  # for the minimum detectable effect


@dataclass(frozen=True)
class Metric:
    """How one metric is judged."""

    name: str
    label: str
    kind: str  # ACCEPTANCE, SPEEDUP (within-run ratio) or TIMING (absolute)
    higher_is_better: bool
    threshold: str  # the Thresholds field giving its minimum effect
    relative: bool  # minimum effect relative to the base value (else absolute)


METRICS = {
    m.name: m
    for m in (
        Metric("alpha", "α (exact β)", ACCEPTANCE, True, "alpha_drop", False),
        Metric(
            "accepted_length", "accepted length τ", ACCEPTANCE, True, "accepted_length_drop", True
        ),
        Metric("baseline_itl_ms", "baseline ITL ms", TIMING, False, "latency_rise", True),
        Metric("baseline_tokens_per_s", "baseline tokens/s", TIMING, True, "throughput_drop", True),
        Metric("itl_ms", "ITL ms", TIMING, False, "latency_rise", True),
        Metric("tokens_per_s", "tokens/s", TIMING, True, "throughput_drop", True),
        Metric("speedup", "speedup", SPEEDUP, True, "speedup_drop", True),
        Metric(
            "speedup_recommended", "speedup at recommended", SPEEDUP, True, "speedup_drop", True
        ),
    )
}
