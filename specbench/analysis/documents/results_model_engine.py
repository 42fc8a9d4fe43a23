"""results.json models of the engine runs' sections (`backend: vllm` / `openai`): each entry's
`engine` section (`analysis.pipeline.serving_results`) and the run's `conformance` section against a
transformers reference run (`analysis.conformance`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specbench.analysis.documents.results_model_base import (
    EstimateJSON,
    Interval,
    LatencyTails,
    Num,
    ResultsModel,
)
from specbench.analysis.documents.results_model_load import LoadCell, SloJSON

# --- engine runs ------------------------------------------------------------------------------


class SpecCountersJSON(ResultsModel):
    """The engine's spec-decode counters (`harness.serving.metrics.metrics.SpecCounters.to_dict`)."""

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    num_accepted_tokens_per_pos: list[float]
    source: str


class EngineGammaCounters(ResultsModel):
    """specbench's estimators from the counters at one γ (`analysis.pipeline.serving_results`)."""

    gamma: int
    units: int
    rounds: Num
    mean_accepted_length: EstimateJSON | None
    accepted_proposed: EstimateJSON | None
    accepted_tested: EstimateJSON | None
    from_accepted_length: EstimateJSON | None
    per_position: list[EstimateJSON | None]
    per_position_rate: list[Num]
    histogram: list[int]
    truncation: dict[str, Num]
    counters: SpecCountersJSON
    source: str


class ConcurrencyLatency(ResultsModel):
    """The baseline's latency and batch throughput at one concurrency."""

    n: int
    tpot_ms: EstimateJSON | None
    ttft_ms: EstimateJSON | None
    e2e_ms: EstimateJSON | None
    output_tokens_per_s: Num
    tails: LatencyTails | None = None  # added by analysis.serving.serving_cost


class ConcurrencyCell(ConcurrencyLatency):
    """One γ at one concurrency: its latency, and against the baseline's at that concurrency."""

    speedup: EstimateJSON | None
    throughput_ratio: Num


class ConcurrencyRow(ResultsModel):
    concurrency: int
    baseline: ConcurrencyLatency
    gammas: dict[str, ConcurrencyCell]


class MeasuredScheduleRow(ConcurrencyLatency):
    """The vLLM schedule setting at one concurrency (`analysis.serving.serving_schedule`)."""

    concurrency: int
    schedule: list[list[int]] | None
    speedup: EstimateJSON | None  # against off, paired by prompt
    throughput_ratio: Num
    best_fixed_gamma: int | None  # the fixed γ with the highest output tokens/s here
    vs_best_fixed: EstimateJSON | None  # paired decode speedup over that γ
    # paired throughput ratio over that γ (Σ tokens / Σ e2e, Little's law; theory §15)
    paired_throughput_vs_best_fixed: EstimateJSON | None = None
    throughput_vs_best_fixed: Num


class StopsPaying(ResultsModel):
    pays_at: list[int]
    stops_paying_at: int | None
    never_pays: bool


class StepCellFit(ResultsModel):
    """One measured cell of the step-cost model against its fit (`analysis.pipeline.schedule_section`)."""

    b: int
    gamma: int
    tau: Num
    step_ms: Num
    fitted_ms: Num
    loo_ms: Num
    loo_rel_error: Num


class BatchModel(ResultsModel):
    """The batch-aware step-cost model (docs/theory.md §15) and where its error was measured."""

    form: str
    n_cells: int
    fitted: bool
    reason: str | None = None  # not fitted only
    params_ms: dict[str, Num] | None = None
    knee_tokens: Num = None
    error_measured: str | None = None
    cells: list[StepCellFit] | None = None
    loo_median_abs_rel_error: Num = None
    loo_max_abs_rel_error: Num = None


class ScheduleRow(ResultsModel):
    """One measured concurrency of the γ schedule."""

    concurrency: int
    gamma: int  # 0 = off
    verdict: Literal["on", "off"]
    reason: str
    throughput_ratio: dict[str, EstimateJSON | None]  # γ → ratio to no speculation
    decision_lower_bound: dict[str, Num]
    throughput_tok_s: dict[str, Num]  # "0" = no speculation
    predicted_throughput_tok_s: dict[str, Num]
    # the schedule's choice here against the fixed γ of highest measured throughput, paired
    best_fixed_gamma: int | None = None
    vs_best_fixed: EstimateJSON | None = None


class ScheduleBoundary(ResultsModel):
    between: tuple[int, int]
    at: int
    rule: Literal["model", "geometric_midpoint"]


class GammaSchedule(ResultsModel):
    """The γ schedule by concurrency (`analysis.decide.gamma_schedule`): ranges [lo, hi, k], k = 0 off."""

    rule: str
    family: str
    false_on_rate: Num
    margin: float
    throughput: str
    concurrencies: list[ScheduleRow]
    ranges: list[tuple[int, int, int]]
    boundaries: list[ScheduleBoundary]
    measured_up_to: int
    extrapolated_from: int


class RankingRow(ResultsModel):
    """One setting (method × γ × endpoint) of an engine run's ranking (`analysis.decide.engine_ranking`)."""

    rank: int
    label: str
    method: str | None
    drafter: str
    policy: str
    gamma: int
    n_prompts: int
    speedup: EstimateJSON | None
    decision_lower_bound: Num  # simultaneous over every candidate (docs/theory.md §8)
    clears: bool  # decision_lower_bound > 1 + margin
    chosen: bool  # the recommended setting (verdict on)
    mean_accepted_length: EstimateJSON | None
    alpha: EstimateJSON | None
    acceptance_source: str
    stops_paying_at: int | None


class EngineSection(ResultsModel):
    backend: str | None
    reference_concurrency: int
    # per_request_response (the engine's own per-request figures), per_request_counters,
    # batch_counters, polluted, unavailable; a list when γ settings had different sources
    acceptance_source: str | list[str]
    counters_polluted_batches: int = 0  # batches whose counters showed other traffic (§17)
    per_gamma: dict[str, EngineGammaCounters]
    accept_length_gauge: Num
    concurrency: list[ConcurrencyRow]
    stops_paying: dict[str, StopsPaying]
    metrics_available: bool
    chosen_gamma: int | None
    chosen_stops_paying_at: int | None
    batch_model: BatchModel | None = None
    schedule: GammaSchedule | None = None
    load: list[LoadCell] | None = None  # per setting × load point (analysis.serving.load_cells)
    slo: SloJSON | None = None
    measured_schedule: list[MeasuredScheduleRow] | None = (
        None  # vllm runs with speculative.schedule
    )
    ranking: list[RankingRow] = Field(default_factory=list)  # best point speedup first
    chosen_setting: str | None = None  # the chosen setting's label
    ranking_basis: str | None = None  # the prompts the ranking rests on (those of the verdict)


# --- conformance (engine runs with conformance.reference_run) ---------------------------------


class ConformanceStat(ResultsModel):
    """τ or a_i of the engine against the reference (`analysis.conformance.measure`)."""

    position: int | None = None  # a_i only
    engine: float
    reference: float
    diff: float
    ci95: Interval
    relative_shortfall: float
    detectable_shortfall: Num = None  # at 80 % power, relative to the reference (None: unbounded)
    p_adjusted: Num
    shortfall: bool
    higher: bool
    untested: str | None = None


class GreedyOutputs(ResultsModel):
    n: int
    identical: int


class ConformanceRow(ResultsModel):
    workload: str
    temperature: float
    gamma: int
    n_prompts: int
    verdict: Literal["ok", "higher", "shortfall", "insufficient"]
    mean_accepted_length: ConformanceStat | None = None  # not when insufficient
    per_position: list[ConformanceStat | None] | None = None
    family_tests: int | None = None
    greedy_outputs: GreedyOutputs | None = None  # T = 0 only


class Conformance(ResultsModel):
    reference_run: str
    comparisons: list[ConformanceRow]
    status: Literal["ok", "shortfall", "unavailable"]
    reason: str | None = None  # unavailable only
    family_wise_alpha: Num = None
    setting_differences: list[str] | None = None
    causes: list[str] | None = None  # shortfall only
