"""What `specbench compare` judges: the row statuses, the metrics with their direction and minimum
effect, and `Thresholds` (the `--thresholds` YAML keys). docs/compare.md states the defaults and
where the run-to-run CVs were measured."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

IMPROVED = "improved"
REGRESSED = "regressed"
UNCHANGED = "unchanged"
NOT_SIGNIFICANT = "not significant"
NOT_COMPARABLE = "not comparable"
INFORMATIONAL = "informational"
# a gating row that could not have seen its minimum effect (its MDE is larger, or it is untested)
INCONCLUSIVE = "inconclusive"
STATUSES = (
    REGRESSED,
    INCONCLUSIVE,
    IMPROVED,
    NOT_SIGNIFICANT,
    NOT_COMPARABLE,
    INFORMATIONAL,
    UNCHANGED,
)

ACCEPTANCE, SPEEDUP, TIMING = "acceptance", "speedup", "timing"
CODE, ENV = "code", "env"  # what the comparison is about (`subject`)

# Run-to-run coefficient of variation measured on this project's CPU (docs/compare.md §noise):
# `specbench run configs/tiny.yaml` three times, each row's log-speedup difference between runs
# less its per-prompt bootstrap variance (method of moments), pooled over the rows.
RUN_TO_RUN_CV_SPEEDUP = 0.07
RUN_TO_RUN_CV_TIMING = 0.95  # absolute tokens/s moved up to 4× between runs on this shared host


# The rows that gate by default: a canary judge's "critical" metrics. Every other row is
# reported, not gated, and outside Holm's family (docs/compare.md, "Gating rows").
DEFAULT_GATE = ("alpha", "speedup_recommended", "verdict")
VERDICT = "verdict"  # the recommendation row's metric name
ALL_ROWS = "*"  # `gate: ["*"]`: every tested row gates (the behaviour before gating rows)


class Calibration(BaseModel):
    """What `specbench compare --calibrate RUN RUN RUN …` measured on the user's runner (A/A runs
    of one code and config): the noise the plan sizes a gate with, and what a prompt costs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runs: int = Field(ge=2, le=10_000)  # A/A runs behind the figures
    confidence: float = Field(gt=0.5, lt=1.0)  # of the upper confidence limits written
    prompts: int = Field(ge=1, le=1_000_000)  # prompts per run (per workload × T)
    groups: int = Field(ge=1, le=100_000)  # workloads × temperatures measured
    sampled_groups: int = Field(ge=0, le=100_000)  # of which at T > 0
    settings: int = Field(default=1, ge=1, le=10_000)  # speedup @γ rows per group
    speedup_cv_estimate: float = Field(ge=0.0)  # run-to-run CV of the speedup, point estimate
    # the SD of one prompt's paired difference between two runs: log speedup, and α at T > 0
    speedup_prompt_sd: float = Field(ge=0.0, le=100.0)
    alpha_prompt_sd: float | None = Field(default=None, ge=0.0, le=1.0)
    greedy_deterministic: bool | None = None  # T = 0 acceptance identical across the runs
    target_forwards_per_prompt: float = Field(ge=0.0)  # one run, every setting measured
    seconds_per_prompt: float = Field(ge=0.0)  # measured decode + prefill time, one run
    # calibrated on interleaved A/A pairs (`compare --ab`): the noise of a paired difference
    interleaved: bool = False


class PlanSize(BaseModel):
    """What CI measures per side (`specbench compare --plan` sizes it; `validate` checks it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompts: int = Field(ge=2, le=1_000_000)  # per workload × temperature
    runs_per_side: int = Field(ge=1, le=10_000)  # processes (run directories) per side
    interleaved: bool = False  # both sides on one machine, alternated (else separate runs)


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
    # the metrics that gate (row metric names without "@γ", "verdict", or "*" for every row)
    gate: tuple[str, ...] = Field(default=DEFAULT_GATE, min_length=1, max_length=32)
    calibration: Calibration | None = None  # written by `compare --calibrate`
    plan: PlanSize | None = None  # what CI measures; sized by `compare --plan`

    @field_validator("gate")
    @classmethod
    def _known_metrics(cls, gate: tuple[str, ...]) -> tuple[str, ...]:
        known = (*METRICS, VERDICT, ALL_ROWS)
        bad = [g for g in gate if g not in known]
        if bad:
            raise ValueError(f"unknown gating metric {bad[0]!r}; known: {', '.join(known)}")
        return gate

    def gates(self, metric: str) -> bool:
        """Whether a row of this metric ("speedup@4", "alpha", "verdict", …) gates."""
        name = metric.split("@")[0]
        name = "speedup" if name.startswith("speedup[") else name  # a setting's speedup row
        return ALL_ROWS in self.gate or name in self.gate


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
