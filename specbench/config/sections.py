"""The typed sections of a run configuration that every backend reads: the model pair, drafters,
γ policies, workloads and their datasets, sampling, the decision rule, prices, conformance.

Every section is a `StrictModel`: an unknown key is an error (with a "did you mean", see
`config.loader`) and NaN / ±inf are refused in every float.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specbench import defaults

# Bounds on the sizes a config can ask for, so that a run stays within memory and minutes.
MAX_GAMMA = 64
MAX_NEW_TOKENS = 32_768
MAX_PROMPTS = 100_000
MAX_REPEATS = 1_000
MAX_BOOTSTRAP = 100_000


class StrictModel(BaseModel):
    """A config section: unknown keys refused, values frozen, floats finite."""

    # NaN and ±inf are refused in every float (a NaN temperature ran no check and printed
    # LOSSLESS): "Input should be a finite number".
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ModelSpec(StrictModel):
    """A Hugging Face model: hub id or local directory (`tiny-target` / `tiny-draft` name the
    shipped pair)."""

    model: str
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    device: str = "auto"  # "auto" = cuda if available else cpu
    device_map: str | None = None  # e.g. "auto" for multi-GPU placement via accelerate
    revision: str | None = None
    trust_remote_code: bool = False
    # Deliberately weaken a draft (for regression demos): Gaussian noise of this std added to
    # its logits before processing. 0 = off.
    logit_noise: float = Field(default=0.0, ge=0.0, le=1000.0)


DRAFT_METHODS = ("model", "ngram")
POLICY_NAMES = ("fixed", "adaptive", "heuristic", "confidence", "temperature")


class DraftSpec(ModelSpec):
    """The drafter: a model (`method: model`) or model-free n-gram prompt lookup."""

    method: str = "model"
    name: str = ""  # how records and reports label it (default: the method)
    model: str = ""
    prompt_lookup_min: int = Field(default=1, ge=1, le=MAX_GAMMA)
    prompt_lookup_max: int = Field(default=3, ge=1, le=MAX_GAMMA)

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        if v not in DRAFT_METHODS:
            raise ValueError(f"unknown drafter '{v}'; valid drafters: {', '.join(DRAFT_METHODS)}")
        return v

    @property
    def label(self) -> str:
        return self.name or self.method

    @model_validator(mode="after")
    def _check(self) -> DraftSpec:
        if self.method == "model" and not self.model:
            raise ValueError("draft.model is required when draft.method is 'model'")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError("draft.prompt_lookup_min must be <= draft.prompt_lookup_max")
        return self


class PolicySpec(StrictModel):
    """A γ policy (docs/theory.md §5; see specbench/decoding/policies.py). Options not used by a policy are
    ignored. `gamma` is the starting γ (adaptive, heuristic) or the base γ (fixed, temperature)."""

    name: str
    gamma: int = Field(default=4, ge=1, le=MAX_GAMMA)
    min_gamma: int = Field(default=2, ge=1, le=MAX_GAMMA)
    max_gamma: int = Field(default=8, ge=1, le=MAX_GAMMA)
    window: int = Field(default=20, ge=1, le=100_000)
    high: float = 0.85
    low: float = 0.6
    threshold: float = 0.4

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if v not in POLICY_NAMES:
            raise ValueError(f"unknown policy '{v}'; valid policies: {', '.join(POLICY_NAMES)}")
        return v

    @model_validator(mode="after")
    def _check(self) -> PolicySpec:
        if self.min_gamma > self.max_gamma:
            raise ValueError("policy min_gamma must be <= max_gamma")
        if not 0.0 < self.threshold < 1.0:
            raise ValueError("policy threshold must be in (0, 1)")
        if not 0.0 <= self.low <= self.high <= 1.0:
            raise ValueError("policy low/high must satisfy 0 <= low <= high <= 1")
        return self

    @property
    def label(self) -> str:
        return self.name


class DatasetSpec(StrictModel):
    """Where a workload's prompts come from: exactly one of `name`, `path`, `hf_id`, `generate`."""

    name: str | None = None  # a shipped set in datasets/ (e.g. "code", "tiny_code")
    # a set generated on the fly (data/long_context.py): `documents` prompts of ~`prompt_words`
    # words each (≈ 1.3 tokens per word), the same on every machine
    generate: Literal["long_context"] | None = None
    prompt_words: int = Field(default=3000, ge=50, le=100_000)
    documents: int = Field(default=32, ge=1, le=1000)
    path: str | None = None  # a local JSONL / CSV / Parquet file, or a `save_to_disk` directory
    hf_id: str | None = None  # a Hugging Face hub dataset id
    hf_config: str | None = None
    split: str = "train"
    revision: str | None = None
    format: Literal["auto", "specbench", "spec_bench", "jsonl", "csv", "parquet", "hf_disk"] = (
        "auto"
    )
    # Columns or field paths (`request.messages`, `metadata.category`: see data/paths.py).
    prompt_field: str | None = None  # a single-turn prompt column
    turns_field: str | None = None  # a list-of-user-turns column
    # a logged conversation (OpenAI messages: system, user, assistant + tool calls, tool results;
    # default: a `messages` column when the row has no turns / prompt) and its `tools` list
    messages_field: str | None = None
    tools_field: str | None = None
    # the logged assistant turns of a multi-turn conversation: sent as logged (replay) while the
    # model answers each turn, or replaced by the model's own earlier answers (regenerate)
    assistant_turns: Literal["replay", "regenerate"] = "replay"
    id_field: str | None = None
    reference_field: str | None = None
    workload_field: str | None = None  # a column naming each row's workload / category
    category_map: dict[str, str] = Field(default_factory=dict)  # category → workload
    group_mt_bench: bool = True  # Spec-Bench: the 8 MT-bench categories → one "conversation"
    # How each request is sampled: with the config's grid (`sampling.temperatures`, `top_p`,
    # `max_new_tokens`), or as logged: each row's own temperature / top_p / max tokens (field
    # paths; defaults `temperature`, `top_p`, `max_tokens`; a missing value falls back to the
    # config's, and `max_new_tokens` stays the ceiling). A logged workload runs once, not per
    # temperature of the grid.
    sampling: Literal["config", "logged"] = "config"
    temperature_field: str | None = None
    top_p_field: str | None = None
    max_tokens_field: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        given = [k for k in ("name", "path", "hf_id", "generate") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("a dataset needs exactly one of 'name', 'path', 'hf_id' or 'generate'")
        if self.sampling != "logged":
            for key in ("temperature_field", "top_p_field", "max_tokens_field"):
                if getattr(self, key):
                    raise ValueError(f"dataset.{key} needs dataset.sampling: logged")
        return self


class WorkloadSpec(StrictModel):
    name: str
    dataset: DatasetSpec
    n: int | None = Field(
        default=None, ge=1, le=MAX_PROMPTS
    )  # sample this many prompts (None = all)
    weight: float = Field(
        default=1.0, ge=0.0, le=1e6
    )  # traffic weight for the global recommendation


class SamplingSpec(StrictModel):
    temperatures: list[float] = Field(default_factory=lambda: [0.0])
    top_p: float = 1.0
    top_k: int = Field(default=0, ge=0, le=1_000_000)

    @field_validator("temperatures")
    @classmethod
    def _temps(cls, v: list[float]) -> list[float]:
        if not v:
            raise ValueError("sampling.temperatures needs at least one value")
        if any(not 0 <= t <= 100 for t in v):
            raise ValueError("sampling.temperatures must be in [0, 100] (0 = greedy)")
        return list(dict.fromkeys(float(t) for t in v))  # a repeat is measured once, not twice

    @field_validator("top_p")
    @classmethod
    def _top_p(cls, v: float) -> float:
        if not 0.0 < v <= 1.0:
            raise ValueError("sampling.top_p must be in (0, 1]")
        return v


class DecisionSpec(StrictModel):
    margin: float = Field(
        default=defaults.MARGIN, ge=0.0, le=100.0
    )  # ON only if speedup CI low end > 1 + margin
    ci_level: float = Field(default=defaults.CI_LEVEL, gt=0.5, lt=1.0)
    bootstrap: int = Field(default=2000, ge=100, le=MAX_BOOTSTRAP)
    target_ci_halfwidth: float = Field(
        default=defaults.CI_HALFWIDTH, gt=0.0, le=10.0
    )  # for "too few prompts" warnings


MAX_BUDGET_FORWARDS = 10**9


class AdaptiveSpec(StrictModel):
    """Bounds of the adaptive plan (`plan: adaptive`, harness/transformers/adaptive.py, docs/theory.md §14):
    the budget in wall-clock minutes or in target forwards (the target model's forward calls of
    the measured units: a machine-independent budget), spread over the undecided workload ×
    temperature cells, the prompts
    a cell may use (None = all the workload's), and the settings measured directly per drafter
    (the sequential rule's max-T test runs over those measured; the looks end at the prompts a
    cell may use, fixed before any data),
    and whether a cell its prompts cannot settle stops early as "futile" (§14)."""

    budget_minutes: float | None = Field(default=None, gt=0.0, le=1e6)
    budget_forwards: int | None = Field(default=None, ge=1, le=MAX_BUDGET_FORWARDS)
    max_prompts: int | None = Field(default=None, ge=1, le=MAX_PROMPTS)
    max_candidates: int = Field(default=3, ge=1, le=16)
    futility: bool = True


MAX_BATCH_SIZE = 256


class BatchTimingSpec(StrictModel):
    """Transformers backend: time the target's verify and the draft's step over b rows for every
    γ of the grid (`spec.batch_timing`), for the batch-size prediction (docs/theory.md §18)."""

    batch_sizes: list[int] = Field(default_factory=lambda: [1, 2, 4, 8, 16])
    repeats: int = Field(default=5, ge=1, le=100)  # measurements per (workload, b, γ)
    warmup: int = Field(default=1, ge=0, le=10)  # repetitions run first and discarded

    @field_validator("batch_sizes")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        if not v or len(v) > 16 or any(not 1 <= b <= MAX_BATCH_SIZE for b in v):
            raise ValueError(
                f"batch_timing.batch_sizes needs 1 to 16 values, each in [1, {MAX_BATCH_SIZE}]"
            )
        return sorted(set(v))


class EconomicsSpec(StrictModel):
    """Prices for the report's cost per 10⁶ output tokens (`analysis.serving.serving_cost`); they change
    no measurement."""

    gpu_hour_usd: float | None = Field(default=None, gt=0.0, le=1e6, allow_inf_nan=False)
    gpus: int = Field(default=1, ge=1, le=100_000)  # GPUs serving the target


class ConformanceSpec(StrictModel):
    """Compare an engine's acceptance with a transformers-backend reference run."""

    reference_run: str | None = None  # run directory of the reference (same prompts, sampling)
    min_effect: float = Field(default=0.05, ge=0.0)  # flag shortfalls above this relative size
