"""results.json (schema 2) as pydantic models: what `analysis.results.build_results` writes, for
the transformers backend and the serving engines (`backend: vllm` / `openai`) alike.

The report (`specbench.report`) renders a validated `RunResults` and reads attributes, so a key
renamed in the analysis fails validation at the report's entry instead of printing "–" in a
table. The JSON Schema of these models ships as docs/schema/results.schema.json; regenerate it
with `python -m specbench.analysis.results_model` (tests/analysis/test_results_model.py fails
while the shipped file differs from the models).

Conventions: a field without a default is written for every workload of every backend; a field
defaulting to None is written only by one backend or in one case (named in its comment). Numbers
the analysis could not compute are null (`analysis.serialize.json_num`). Dict keys that are γ or
concurrency values are strings, as JSON writes them. The field and section meanings are in the
README's results.json section and docs/theory.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RESULTS_SCHEMA_VERSION = 2
Verdict = Literal["on", "off", "not_measured"]
Num = float | None
Interval = tuple[Num, Num]
# env.json is passed through as written (`report.writer.read_env`): text or number fields
EnvValue = str | int | float | None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --- building blocks --------------------------------------------------------------------------


class EstimateJSON(_Model):
    """A point estimate with its interval at the run's ci_level (named ci95 for history); either
    end is null where no honest bound exists at this sample size (docs/theory.md §7)."""

    value: Num
    ci95: Interval


class AlphaJSON(EstimateJSON):
    """The headline α and the estimator behind it (docs/theory.md §2)."""

    estimator: Literal["exact_beta", "accepted_tested"]


class ModelPair(_Model):
    """One figure under both prediction models of ā(γ) (docs/theory.md §3)."""

    iid: Num
    empirical: Num


class SettingLabel(_Model):
    drafter: str
    policy: str
    gamma: int


class SettingSpeedup(SettingLabel):
    """A measured setting with its speedup (and, where the rule computed it, its simultaneous
    lower bound)."""

    speedup: EstimateJSON | None
    decision_lower_bound: Num = None


class ModelOptimum(_Model):
    gamma: int
    predicted_speedup: Num
    model: Literal["iid", "empirical"]


class Percentiles(_Model):
    """p50 / p90 / p99, each null below the requests it needs (`analysis.serving_cost`)."""

    p50: Num
    p90: Num
    p99: Num


class LatencyTails(_Model):
    n: int
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    e2e_ms: Percentiles


# --- run, env ---------------------------------------------------------------------------------


class RunSampling(_Model):
    temperatures: list[float] | None = None
    top_p: float | None = None
    top_k: int | None = None


class RunInfo(_Model):
    name: str | None
    target: str | None
    draft: str | None
    drafter: str
    sampling: RunSampling | None
    gammas: list[int] | None
    max_new_tokens: int | None
    backend: str
    concurrency: list[int] | None
    margin: float
    ci_level: float


class ServerEndpoint(BaseModel):
    """An openai-backend server as env.json lists it."""

    model_config = ConfigDict(extra="allow")  # passed through from env.json (any version)

    url: str | None = None
    gamma: int | None = None
    label: str | None = None


class RunEnv(BaseModel):
    """env.json of the run, passed through. The fields the report reads are typed; the rest are
    kept as written, because env.json is whatever the specbench version and backend that made
    the run recorded (`report.writer.read_env` accepts any text / number field)."""

    model_config = ConfigDict(extra="allow")

    specbench: EnvValue = None
    device: EnvValue = None
    gpu: EnvValue = None
    cpu: EnvValue = None
    dtype: EnvValue = None
    torch: EnvValue = None
    transformers: EnvValue = None
    backend: EnvValue = None
    vllm: EnvValue = None
    engine_args: dict[str, Any] | None = None
    speculative_config: dict[str, Any] | None = None
    servers: list[ServerEndpoint] | None = None
    server_info: dict[str, dict[str, Any]] | None = None
    chat: bool | EnvValue = None
    prompt_format: EnvValue = None
    memory: dict[str, Any] | None = None  # model profiles (analysis.serving_cost.draft_memory)


# --- one workload × temperature ---------------------------------------------------------------


class AlphaEstimators(_Model):
    """Every α estimator at γ = at_gamma (docs/theory.md §2)."""

    exact_beta: EstimateJSON | None
    accepted_tested: EstimateJSON | None
    accepted_proposed: EstimateJSON | None
    from_accepted_length: EstimateJSON | None
    mean_accepted_length: EstimateJSON | None = None  # engine runs: τ from the counters
    at_gamma: int


class DraftStepTiming(_Model):
    mean: Num
    median: Num
    p10: Num
    p90: Num


class VerifyFit(_Model):
    t0_ms: Num
    t1_ms_per_token: Num
    mean_residual_ms_by_drafted: dict[int, Num]


class OverheadFit(_Model):
    o0_ms: Num
    o1_ms_per_token: Num


class EngineRoundFit(_Model):
    """Engine runs: the whole round (draft + verify) as r0 + r1·γ from TPOT × τ per γ."""

    r0_ms: Num
    r1_ms_per_token: Num
    points: int


class Timing(_Model):
    """The timing model's parts (docs/theory.md §4); engine runs have only the round fit."""

    t_draft_ms: DraftStepTiming
    verify_fit: VerifyFit
    overhead_fit: OverheadFit
    cost_ratio: Num
    engine_round_fit: EngineRoundFit | None = None  # engine runs


class GammaRow(_Model):
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


class PredictionError(_Model):
    mean_abs_rel: Num
    n: int


class PredictionErrors(_Model):
    iid: PredictionError
    empirical: PredictionError


class MethodRow(_Model):
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


class ItlPair(_Model):
    baseline: Num
    speculative: Num


class VerdictBasis(_Model):
    """Which prompts the verdict rests on (docs/theory.md §13)."""

    prompts: Literal["all", "non_degenerate"]
    n_used: int
    n_degenerate_excluded: int


class Recommendation(_Model):
    """The workload's own verdict (`analysis.recommend`, docs/theory.md §8)."""

    rule: str
    candidates: int
    false_on_rate: Num
    margin: float
    n_prompts: int | None = None  # absent without a joint bootstrap (too few prompts)
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


class DegeneratePrompt(_Model):
    prompt_id: str
    reason: str
    answer_tail: str


class ContentSubset(_Model):
    n_prompts: int
    alpha: EstimateJSON | None
    speedup: EstimateJSON | None
    verdict: Verdict | None


class ContentCheck(_Model):
    """Are the answers real text? (`analysis.validity`, docs/theory.md §13)."""

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


class AlphaSpread(_Model):
    sd: Num
    min: Num
    p10: Num
    p25: Num
    median: Num
    p75: Num
    p90: Num
    max: Num


class PromptAlpha(_Model):
    prompt_id: str
    alpha: Num
    tokens: int
    degenerate: bool


class HeterogeneityRow(_Model):
    """Tokens per round four ways at one γ (docs/theory.md §3)."""

    gamma: int
    per_prompt_pooled: Num
    round_pooled: Num
    round_over_per_prompt: Num
    iid_per_prompt: Num
    iid_at_pooled_alpha: Num
    iid_pooled_over_per_prompt: Num


class PerPromptAlpha(_Model):
    estimator: Literal["exact_beta"]
    at_gamma: int
    n_prompts: int
    token_pooled: EstimateJSON | None
    request_mean: EstimateJSON | None
    request_mean_non_degenerate: EstimateJSON | None
    spread: AlphaSpread
    values: list[PromptAlpha]
    heterogeneity: list[HeterogeneityRow]


class PositionDetail(_Model):
    """a_i with its interval and the rounds behind it (docs/theory.md §2 (d))."""

    position: int
    rate: Num
    ci95: Interval
    rounds: int
    prompts: int
    enough: bool


class MaxTokensSpread(_Model):
    min: int
    median: float
    max: int


class RequestSampling(_Model):
    """A logged workload's request mix (`dataset.sampling: logged`)."""

    source: Literal["logged"]
    prompts: int
    temperature: dict[str, int]
    top_p: dict[str, int]
    max_tokens: MaxTokensSpread
    from_config: dict[str, int]
    max_tokens_capped: int


# --- engine runs ------------------------------------------------------------------------------


class SpecCountersJSON(_Model):
    """The engine's spec-decode counters (`harness.serving.metrics.SpecCounters.to_dict`)."""

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    num_accepted_tokens_per_pos: list[float]
    source: str


class EngineGammaCounters(_Model):
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


class ConcurrencyLatency(_Model):
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


class ConcurrencyRow(_Model):
    concurrency: int
    baseline: ConcurrencyLatency
    gammas: dict[str, ConcurrencyCell]


class StopsPaying(_Model):
    pays_at: list[int]
    stops_paying_at: int | None
    never_pays: bool


class EngineSection(_Model):
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


class WorkloadResult(_Model):
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
    recommendation: Recommendation
    engine: EngineSection | None = None  # engine runs
    failed_units: int
    request_sampling: RequestSampling | None = None  # logged workloads
    baseline_tails: LatencyTails | None


# --- the pool-wide decision -------------------------------------------------------------------


class PoolDecision(_Model):
    """One temperature's pool-wide setting (`analysis.recommend.pool_recommendation`)."""

    temperature: float
    workloads: list[str]
    rule: str | None = None  # absent when no workload has a measured verdict
    candidates: int | None = None
    false_on_rate: Num = None
    per_workload_routing_speedup: Num = None
    critical_value: Num = None
    settings: list[SettingSpeedup] | None = None
    drafter: str | None = None  # ON only
    policy: str | None = None
    gamma: int
    verdict: Verdict
    speedup: EstimateJSON | None
    decision_lower_bound: Num = None  # ON only
    best_measured: SettingSpeedup | None = None  # OFF with candidates
    reason: str | None = None
    on_for: list[str]
    off_for: list[str]
    not_measured: list[str]


class GlobalRecommendation(_Model):
    by_temperature: list[PoolDecision]


# --- economics --------------------------------------------------------------------------------


class CostAtLoad(_Model):
    concurrency: int
    usd_per_million_off: Num
    usd_per_million_on: Num
    basis: str


class WorkloadEconomics(_Model):
    workload: str
    temperature: float
    gamma: int | None
    verdict: Verdict
    loads: list[CostAtLoad]
    ttft_change_ms: Num
    draft_memory_mb: Num


class DraftMemory(_Model):
    """What a draft costs in memory (docs/theory.md §12)."""

    weights_mib: Num
    weights_share_of_target: Num
    kv_kib_per_token: Num
    target_kv_tokens_displaced: int | None
    kv_share_per_sequence: Num


class Economics(_Model):
    gpu_hour_usd: Num
    gpus: int
    by_workload: list[WorkloadEconomics]
    draft_memory: dict[str, DraftMemory] | None


# --- conformance (engine runs with conformance.reference_run) ---------------------------------


class ConformanceStat(_Model):
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


class GreedyOutputs(_Model):
    n: int
    identical: int


class ConformanceRow(_Model):
    workload: str
    temperature: float
    gamma: int
    n_prompts: int
    verdict: Literal["ok", "higher", "shortfall", "insufficient"]
    mean_accepted_length: ConformanceStat | None = None  # not when insufficient
    per_position: list[ConformanceStat | None] | None = None
    family_tests: int | None = None
    greedy_outputs: GreedyOutputs | None = None  # T = 0 only


class Conformance(_Model):
    reference_run: str
    comparisons: list[ConformanceRow]
    status: Literal["ok", "shortfall", "unavailable"]
    reason: str | None = None  # unavailable only
    family_wise_alpha: Num = None
    setting_differences: list[str] | None = None
    causes: list[str] | None = None  # shortfall only


# --- the document -----------------------------------------------------------------------------


class Failure(_Model):
    """A unit (prompt × setting) that failed and was not completed by a later --resume."""

    workload: str
    temperature: float
    gamma: int
    prompt_id: str
    error: str | None


class RunResults(_Model):
    """results.json: the whole document (`analysis.results.build_results`)."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        title="specbench results.json",
        json_schema_extra={"$comment": "generated by python -m specbench.analysis.results_model"},
    )

    schema_: Literal[2] = Field(alias="schema")
    run: RunInfo
    env: RunEnv
    workloads: list[WorkloadResult]
    global_: GlobalRecommendation = Field(alias="global")
    economics: Economics
    failures: list[Failure]
    conformance: Conformance | None = None  # engine runs with conformance.reference_run


def as_results(results: RunResults | dict[str, Any]) -> RunResults:
    """The typed document of a results.json dict (as built or as read back); a model passes."""
    if isinstance(results, RunResults):
        return results
    return RunResults.model_validate(results)


# --- JSON Schema ------------------------------------------------------------------------------

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schema"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"  # what pydantic generates

# name → model of each shipped schema; records and accept.json join here when they are models
SCHEMA_MODELS: dict[str, type[BaseModel]] = {"results": RunResults}


def json_schemas() -> dict[str, dict[str, Any]]:
    """{name: JSON Schema (draft 2020-12)} of every file format specbench writes that has a
    model."""
    return {
        name: {"$schema": JSON_SCHEMA_DIALECT, **model.model_json_schema(by_alias=True)}
        for name, model in SCHEMA_MODELS.items()
    }


def schema_text(schema: dict[str, Any]) -> str:
    """The shipped file's text of one schema (stable: sorted keys, one trailing newline)."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_schemas(out_dir: Path = SCHEMA_DIR) -> list[Path]:
    """Write docs/schema/NAME.schema.json for every model; return the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, schema in json_schemas().items():
        path = out_dir / f"{name}.schema.json"
        path.write_text(schema_text(schema), encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_schemas(Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMA_DIR):
        print(written)
