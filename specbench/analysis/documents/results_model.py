"""results.json (schema 3) as pydantic models: what `analysis.pipeline.results.build_results` writes, for
the transformers backend and the serving engines (`backend: vllm` / `openai`) alike.

This module holds the document (`RunResults`: run, env, the pool-wide decision, economics,
failures) and the JSON Schema; one workload's entry is `results_model_workload`, the engine runs'
sections `results_model_engine`, the shared parts (estimates, settings, tails)
`results_model_base`.

The report (`specbench.report`) renders a validated `RunResults` and reads attributes, so a key
renamed in the analysis fails validation at the report's entry instead of printing "–" in a
table. The JSON Schema of these models ships as docs/schema/results.schema.json (`analysis.documents.schemas`;
regenerate with `specbench schema --out docs/schema`; tests/unit/test_schemas.py fails while a
shipped file differs from the models).

Conventions: a field without a default is written for every workload of every backend; a field
defaulting to None is written only by one backend or in one case (named in its comment). Numbers
the analysis could not compute are null (`analysis.stats.serialize.json_num`). Dict keys that are γ
values are strings, as JSON writes them (the verify fit's residuals by drafted count: int). The
fields' meanings are in docs/results.md and docs/theory.md.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from specbench.analysis.documents.results_model_base import (
    DecisionNumbers,
    EstimateJSON,
    Num,
    ResultsModel,
    SettingSpeedup,
    Verdict,
)
from specbench.analysis.documents.results_model_batch import BatchPrediction, PredictionCheck
from specbench.analysis.documents.results_model_engine import Conformance
from specbench.analysis.documents.results_model_load import MixSection
from specbench.analysis.documents.results_model_profile import ProfileDecision
from specbench.analysis.documents.results_model_workload import WorkloadResult

# env.json is passed through as written (`harness.run.rundir.read_env`): text or number fields
EnvValue = str | int | float | None

# --- run, env ---------------------------------------------------------------------------------


class RunSampling(ResultsModel):
    temperatures: list[float] | None = None
    top_p: float | None = None
    top_k: int | None = None


class RunInfo(ResultsModel):
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
    the run recorded (`harness.run.rundir.read_env` accepts any text / number field)."""

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
    # one method's, or a list: several methods in one run (`speculative:` as a list)
    speculative_config: dict[str, Any] | list[dict[str, Any]] | None = None
    servers: list[ServerEndpoint] | None = None
    server_info: dict[str, dict[str, Any]] | None = None
    chat: bool | EnvValue = None
    prompt_format: EnvValue = None
    memory: dict[str, Any] | None = (
        None  # model profiles (analysis.serving.serving_cost.draft_memory)
    )
    privacy: dict[str, Any] | None = None  # what the run's files keep (data/privacy.py)
    # the target's and draft's tokenizer fingerprints (models/fingerprint.py)
    tokenizers: dict[str, str | None] | None = None


# --- the pool-wide decision -------------------------------------------------------------------


class PoolDecision(DecisionNumbers):
    """One temperature's pool-wide setting (`analysis.decide.recommend.pool_recommendation`)."""

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


class GlobalRecommendation(ResultsModel):
    by_temperature: list[PoolDecision]


# --- economics --------------------------------------------------------------------------------


class CostAtLoad(ResultsModel):
    concurrency: int
    usd_per_million_off: Num
    usd_per_million_on: Num
    basis: str


class WorkloadEconomics(ResultsModel):
    workload: str
    temperature: float
    gamma: int | None
    verdict: Verdict
    loads: list[CostAtLoad]
    ttft_change_ms: Num
    draft_memory_mb: Num


class DraftMemory(ResultsModel):
    """What a draft costs in memory (docs/theory.md §12)."""

    weights_mib: Num
    weights_share_of_target: Num
    kv_kib_per_token: Num
    target_kv_tokens_displaced: int | None
    kv_share_per_sequence: Num
    # "loaded": the transformers runner's loaded parameters; "computed": an engine run's, from
    # config.json and the safetensors headers (harness.memory.model_footprint); absent in older runs
    source: Literal["loaded", "computed"] | None = None


class KvCapacityAtGamma(ResultsModel):
    """One speculative engine's KV cache against the engine without speculation."""

    label: str | None
    tokens: int  # num_gpu_blocks × block_size, as the engine reported
    taken_tokens: int | None  # baseline − this; None without a baseline engine's report
    taken_share: Num


class KvCapacity(ResultsModel):
    """The KV-cache capacity speculation takes, as the engines reported it
    (`analysis.serving.serving_cost.kv_capacity_taken`)."""

    source: Literal["engine"]
    baseline_tokens: int | None
    by_gamma: dict[str, KvCapacityAtGamma]


class Economics(ResultsModel):
    gpu_hour_usd: Num
    gpus: int
    by_workload: list[WorkloadEconomics]
    draft_memory: dict[str, DraftMemory] | None
    kv_capacity: KvCapacity | None = None  # engine runs whose engines report it


# --- the document -----------------------------------------------------------------------------


class Failure(ResultsModel):
    """A unit (prompt × setting) that failed and was not completed by a later --resume."""

    workload: str
    temperature: float
    gamma: int
    prompt_id: str
    error: str | None


class RunResults(ResultsModel):
    """results.json: the whole document (`analysis.pipeline.results.build_results`)."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        title="specbench results.json",
        json_schema_extra={
            "$comment": "generated by python -m specbench.analysis.documents.results_model"
        },
    )

    schema_: Literal[3] = Field(alias="schema")
    run: RunInfo
    env: RunEnv
    workloads: list[WorkloadResult]
    global_: GlobalRecommendation = Field(alias="global")
    economics: Economics
    failures: list[Failure]
    conformance: Conformance | None = None  # engine runs with conformance.reference_run
    batch_prediction: BatchPrediction | None = None  # transformers runs with batch_timing (§18)
    prediction_check: PredictionCheck | None = None  # engine runs against such a prediction
    # engine runs with a deployment profile and mix batches (analysis.decide.profile_decision)
    profile_decision: ProfileDecision | None = None
    mix: MixSection | None = None  # engine runs with a profile and a steady-state load

    def json_text(self) -> str:
        """results.json as written: the fields the analysis set (a field it left out stays out,
        as the schema's conventions above say), in the models' field order."""
        document = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return json.dumps(document, indent=2, allow_nan=False) + "\n"
