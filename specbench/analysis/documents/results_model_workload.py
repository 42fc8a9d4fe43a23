"""results.json model of one workload × temperature (an entry of `workloads`), for every
backend: estimates, timing, γ rows, the recommendation, content checks, per-prompt α."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specbench.analysis.documents.results_model_base import (
    AlphaJSON,
    DecisionNumbers,
    EstimateJSON,
    Interval,
    LatencyTails,
    ModelOptimum,
    ModelPair,
    Num,
    ResultsModel,
    SettingLabel,
    SettingSpeedup,
    Verdict,
)
from specbench.analysis.documents.results_model_engine import EngineSection

# --- one workload × temperature ---------------------------------------------------------------


class AlphaEstimators(ResultsModel):
    """Every α estimator at γ = at_gamma (docs/theory.md §2)."""

    exact_beta: EstimateJSON | None
    accepted_tested: EstimateJSON | None
    accepted_proposed: EstimateJSON | None
    from_accepted_length: EstimateJSON | None
    mean_accepted_length: EstimateJSON | None = None  # engine runs: τ from the counters
    at_gamma: int


class DraftStepTiming(ResultsModel):
    mean: Num
    median: Num
    p10: Num
    p90: Num


class VerifyFit(ResultsModel):
    t0_ms: Num
    t1_ms_per_token: Num
    mean_residual_ms_by_drafted: dict[int, Num]


class OverheadFit(ResultsModel):
    o0_ms: Num
    o1_ms_per_token: Num


class EngineRoundFit(ResultsModel):
    """Engine runs: the whole round (draft + verify) as r0 + r1·γ from TPOT × τ per γ."""

    r0_ms: Num
    r1_ms_per_token: Num
    points: int


class Timing(ResultsModel):
    """The timing model's parts (docs/theory.md §4); engine runs have only the round fit."""

    t_draft_ms: DraftStepTiming
    verify_fit: VerifyFit
    overhead_fit: OverheadFit
    cost_ratio: Num
    engine_round_fit: EngineRoundFit | None = None  # engine runs


class GammaRow(ResultsModel):
    """One γ of the primary drafter: predictions, and for a measured γ its measurements."""

    gamma: int
    measured: bool
    predicted_tokens_per_round: ModelPair
    predicted_speedup: ModelPair
    measured_speedup: EstimateJSON | None
    # measured γ only
    alpha_exact_beta: EstimateJSON | None = None
    accepted_proposed: EstimateJSON | None = None
    mean_tokens_per_round: EstimateJSON | None = None
    t_verify_ms_median: Num = None
    itl_ms: EstimateJSON | None = None
    tokens_per_s: EstimateJSON | None = None
    measured_e2e_speedup: EstimateJSON | None = None
    peak_memory_mb: Num = None
    tails: LatencyTails | None = None


class PredictionError(ResultsModel):
    mean_abs_rel: Num
    n: int


class PredictionErrors(ResultsModel):
    iid: PredictionError
    empirical: PredictionError


class MethodRow(ResultsModel):
    """Transformers runs: one measured drafter × policy × γ, ranked by measured speedup."""

    drafter: str
    policy: str
    gamma: int
    mean_gamma_used: Num
    fallback_rounds: int
    mean_tokens_per_round: EstimateJSON | None
    accepted_proposed: EstimateJSON | None
    itl_ms: EstimateJSON | None
    measured_speedup: EstimateJSON | None


class ItlPair(ResultsModel):
    baseline: Num
    speculative: Num


class VerdictBasis(ResultsModel):
    """Which prompts the verdict rests on (docs/theory.md §13)."""

    prompts: Literal["all", "non_degenerate"]
    n_used: int
    n_degenerate_excluded: int


class FiguresBasis(ResultsModel):
    """Which prompts a cell's figures (γ table, ITL, TTFT, tails, engine concurrency and load
    tables, cost) cover: the verdict's (docs/theory.md §13), or every prompt where no
    non-degenerate prompt is left; `all_prompts` names the figures that have no per-prompt split
    (an engine's batch counters) and so stay over every prompt."""

    prompts: Literal["all", "non_degenerate"]
    n_prompts: int
    all_prompts: list[str] = Field(default_factory=list)


class Recommendation(DecisionNumbers):
    """The workload's own verdict (`analysis.decide.recommend`, docs/theory.md §8)."""

    rule: str
    candidates: int
    false_on_rate: Num
    margin: float
    critical_value: Num = None
    drafter: str | None = None  # ON only: the chosen setting
    policy: str | None = None
    gamma: int
    verdict: Verdict
    speedup: EstimateJSON | None
    decision_lower_bound: Num = None  # ON only
    best_measured: SettingSpeedup | None = None  # OFF with a measured setting
    loss_avoided: SettingSpeedup | None = None  # OFF: the worst measured setting
    reason: str
    itl_ms: ItlPair | None
    model_optimum: ModelOptimum | None
    basis: VerdictBasis | None = None


class DegeneratePrompt(ResultsModel):
    prompt_id: str
    reason: str
    answer_tail: str


class ContentSubset(ResultsModel):
    n_prompts: int
    alpha: EstimateJSON | None
    speedup: EstimateJSON | None
    verdict: Verdict | None


class ContentCheck(ResultsModel):
    """Are the answers real text? (`analysis.decide.validity`, docs/theory.md §13)."""

    checked: bool
    n_prompts: int
    n_degenerate: int
    degenerate_share: Num
    reasons: dict[str, int]
    degenerate_prompts: list[DegeneratePrompt]
    answers: int
    hit_length_limit_share: Num
    early_eos_share: Num
    empty_share: Num
    median_repeated_ngram_share: Num
    median_compression_ratio: Num
    mean_target_logprob: Num
    mean_target_logprob_degenerate: Num
    mean_target_logprob_non_degenerate: Num
    # with degenerate prompts only
    all_prompts: ContentSubset | None = None
    non_degenerate: ContentSubset | None = None
    speedup_setting: SettingLabel | None = None
    differs_beyond_intervals: bool | None = None


class AlphaSpread(ResultsModel):
    sd: Num
    min: Num
    p10: Num
    p25: Num
    median: Num
    p75: Num
    p90: Num
    max: Num


class PromptAlpha(ResultsModel):
    prompt_id: str
    alpha: Num
    tokens: int
    degenerate: bool


class HeterogeneityRow(ResultsModel):
    """Tokens per round four ways at one γ (docs/theory.md §3)."""

    gamma: int
    per_prompt_pooled: Num
    round_pooled: Num
    round_over_per_prompt: Num
    iid_per_prompt: Num
    iid_at_pooled_alpha: Num
    iid_pooled_over_per_prompt: Num


class PerPromptAlpha(ResultsModel):
    estimator: Literal["exact_beta"]
    at_gamma: int
    n_prompts: int
    token_pooled: EstimateJSON | None
    request_mean: EstimateJSON | None
    request_mean_non_degenerate: EstimateJSON | None
    spread: AlphaSpread
    values: list[PromptAlpha]
    heterogeneity: list[HeterogeneityRow]


class PositionDetail(ResultsModel):
    """a_i with its interval and the rounds behind it (docs/theory.md §2 (d))."""

    position: int
    rate: Num
    ci95: Interval
    rounds: int
    prompts: int
    enough: bool


class MaxTokensSpread(ResultsModel):
    min: int
    median: float
    max: int


class RequestSampling(ResultsModel):
    """A logged workload's request mix (`dataset.sampling: logged`)."""

    source: Literal["logged"]
    prompts: int
    temperature: dict[str, int]
    top_p: dict[str, int]
    max_tokens: MaxTokensSpread
    from_config: dict[str, int]
    max_tokens_capped: int


class SequenceRow(ResultsModel):
    setting: str
    n: int
    speedup: Num
    interval: Interval


class AdaptiveCell(ResultsModel):
    """An adaptive run's sequential verdict for the cell (docs/theory.md §14)."""

    state: Literal["on", "off", "undecided", "futile"]
    chosen: str | None
    n_prompts: int
    more_prompts: int | None
    prompts_left: int | None = None  # None: futility off, or records without `plan_prompts`
    summary: str
    level: Num
    candidates_k: int
    sequences: list[SequenceRow]


class WorkloadResult(ResultsModel):
    """One workload × temperature (an entry of `workloads`)."""

    workload: str
    temperature: float
    weight: float
    n_prompts: int
    baseline_itl_ms: EstimateJSON | None
    baseline_step_ms: Num
    ttft_ms: EstimateJSON | None
    baseline_tokens_per_s: EstimateJSON | None
    baseline_peak_memory_mb: Num
    timing: Timing
    alpha: AlphaJSON | None
    # with a measured γ only
    alpha_estimators: AlphaEstimators | None = None
    per_position_acceptance: list[Num] | None = None
    accepted_histogram: list[int] | None = None
    gammas: list[GammaRow]
    prediction_error: PredictionErrors
    model_optimum: ModelOptimum | None
    warnings: list[str]
    methods: list[MethodRow] | None = None  # transformers runs
    per_prompt_alpha: PerPromptAlpha | None = None  # transformers runs
    per_position_detail: list[PositionDetail] | None = None  # transformers runs
    content: ContentCheck | None = None
    figures_basis: FiguresBasis | None = None  # older results.json: every prompt
    recommendation: Recommendation
    engine: EngineSection | None = None  # engine runs
    failed_units: int
    request_sampling: RequestSampling | None = None  # logged workloads
    baseline_tails: LatencyTails | None
    adaptive: AdaptiveCell | None = None  # runs of the adaptive plan
