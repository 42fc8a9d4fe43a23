"""results.json models of the engine runs' sections (`backend: vllm` / `openai`): each entry's
`engine` section (`analysis.serving_results`) and the run's `conformance` section against a
transformers reference run (`analysis.conformance`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specbench.analysis.results_model_base import (
    EstimateJSON,
    Interval,
    LatencyTails,
    Num,
    ResultsModel,
)

# --- engine runs ------------------------------------------------------------------------------


class SpecCountersJSON(ResultsModel):
    """The engine's spec-decode counters (`harness.serving.metrics.SpecCounters.to_dict`)."""

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    num_accepted_tokens_per_pos: list[float]
    source: str


class EngineGammaCounters(ResultsModel):
    """specbench's estimators from the counters at one γ (`analysis.serving_results`)."""

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
    tails: LatencyTails | None = None  # added by analysis.serving_cost


class ConcurrencyCell(ConcurrencyLatency):
    """One γ at one concurrency: its latency, and against the baseline's at that concurrency."""

    speedup: EstimateJSON | None
    throughput_ratio: Num


class ConcurrencyRow(ResultsModel):
    concurrency: int
    baseline: ConcurrencyLatency
    gammas: dict[str, ConcurrencyCell]


class StopsPaying(ResultsModel):
    pays_at: list[int]
    stops_paying_at: int | None
    never_pays: bool


class RankingRow(ResultsModel):
    """One setting (method × γ × endpoint) of an engine run's ranking (`analysis.engine_ranking`)."""

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
    acceptance_source: str | list[str]  # a list when γ settings had different sources
    per_gamma: dict[str, EngineGammaCounters]
    accept_length_gauge: Num
    concurrency: list[ConcurrencyRow]
    stops_paying: dict[str, StopsPaying]
    metrics_available: bool
    chosen_gamma: int | None
    chosen_stops_paying_at: int | None
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
