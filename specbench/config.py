"""The typed run configuration: one flat YAML file whose keys are these fields.

Precedence: CLI flags > YAML file > defaults (`load_config(path, overrides)`). Validation errors
become one `SpecbenchError` line naming the key, with the nearest valid key for a typo.
YAML is read with `yaml.safe_load`; `trust_remote_code` is honoured only when a config sets it.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from specbench import defaults
from specbench.errors import SpecbenchError

SCHEMA_VERSION = 1


# Bounds on the sizes a config can ask for, so that a run stays within memory and minutes.
MAX_GAMMA = 64
MAX_NEW_TOKENS = 32_768
MAX_PROMPTS = 100_000
MAX_REPEATS = 1_000
MAX_BOOTSTRAP = 100_000


class _Strict(BaseModel):
    # NaN and ±inf are refused in every float (a NaN temperature ran no check and printed
    # LOSSLESS): "Input should be a finite number".
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ModelSpec(_Strict):
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


class PolicySpec(_Strict):
    """A γ policy (docs/theory.md §5; see specbench/spec/policies.py). Options not used by a policy are
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


class DatasetSpec(_Strict):
    """Where a workload's prompts come from: exactly one of `name`, `path`, `hf_id`."""

    name: str | None = None  # a shipped set in datasets/ (e.g. "code", "tiny_code")
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
        given = [k for k in ("name", "path", "hf_id") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("a dataset needs exactly one of 'name', 'path' or 'hf_id'")
        if self.sampling != "logged":
            for key in ("temperature_field", "top_p_field", "max_tokens_field"):
                if getattr(self, key):
                    raise ValueError(f"dataset.{key} needs dataset.sampling: logged")
        return self


class WorkloadSpec(_Strict):
    name: str
    dataset: DatasetSpec
    n: int | None = Field(
        default=None, ge=1, le=MAX_PROMPTS
    )  # sample this many prompts (None = all)
    weight: float = Field(
        default=1.0, ge=0.0, le=1e6
    )  # traffic weight for the global recommendation


class SamplingSpec(_Strict):
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
        return v

    @field_validator("top_p")
    @classmethod
    def _top_p(cls, v: float) -> float:
        if not 0.0 < v <= 1.0:
            raise ValueError("sampling.top_p must be in (0, 1]")
        return v


class DecisionSpec(_Strict):
    margin: float = Field(
        default=defaults.MARGIN, ge=0.0, le=100.0
    )  # ON only if speedup CI low end > 1 + margin
    ci_level: float = Field(default=defaults.CI_LEVEL, gt=0.5, lt=1.0)
    bootstrap: int = Field(default=2000, ge=100, le=MAX_BOOTSTRAP)
    target_ci_halfwidth: float = Field(
        default=defaults.CI_HALFWIDTH, gt=0.0, le=10.0
    )  # for "too few prompts" warnings


class EconomicsSpec(_Strict):
    """Prices for the report's cost per 10⁶ output tokens (`analysis.serving_cost`); they change
    no measurement."""

    gpu_hour_usd: float | None = Field(default=None, gt=0.0, le=1e6, allow_inf_nan=False)
    gpus: int = Field(default=1, ge=1, le=100_000)  # GPUs serving the target


class EngineSpec(_Strict):
    """`backend: vllm` engine arguments, passed to `vllm.LLM`; `extra` passes any other vLLM
    EngineArgs field through by name (checked against the installed vLLM)."""

    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    dtype: str | None = None  # None = target.dtype
    max_model_len: int | None = Field(default=None, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0.0, le=1.0)  # None = vLLM's
    enforce_eager: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)


class SpeculativeSpec(_Strict):
    """`backend: vllm` speculation: vLLM's `speculative_config` minus `num_speculative_tokens`,
    which is the γ grid (`gammas`)."""

    method: str = "draft_model"  # draft_model, ngram, eagle, eagle3, mtp, suffix, …
    model: str | None = None  # the drafter's weights; draft_model defaults to draft.model
    num_speculative_tokens: list[int] | None = None  # the γ grid; given here it replaces gammas
    options: dict[str, Any] = Field(default_factory=dict)  # any other speculative_config key


class EndpointSpec(_Strict):
    """One OpenAI-compatible server and the speculation setting it was started with."""

    url: str
    gamma: int = Field(default=0, ge=0, le=MAX_GAMMA)  # 0 = the server runs without speculation
    label: str | None = None  # e.g. "draft_model γ=4"; default "γ=<gamma>"


class ServerSpec(_Strict):
    """`backend: openai`: the server(s) measured. specbench changes no speculation setting on a
    server: run one server per setting and say here what each runs (`gamma`, `label`)."""

    url: str = "http://127.0.0.1:8000"  # base URL (with or without /v1)
    gamma: int = Field(default=0, ge=0, le=MAX_GAMMA)
    label: str | None = None
    endpoints: list[EndpointSpec] = Field(default_factory=list)  # several servers instead of url
    model: str | None = None  # served model name; None = the one /v1/models lists
    api_key_env: str | None = None  # name of the environment variable holding the API key
    timeout_s: float = Field(default=120.0, gt=0.0, le=86_400.0)
    retries: int = Field(default=2, ge=0, le=100)
    chat: bool = False  # /v1/chat/completions (the server's chat template) vs /v1/completions
    # completions: send text, or the token ids rendered here with the target's tokenizer
    prompt_format: Literal["text", "tokens"] = "text"
    metrics_url: str | None = None  # default: <server origin>/metrics
    extra_body: dict[str, Any] = Field(default_factory=dict)  # added to every request body


class ConformanceSpec(_Strict):
    """Compare an engine's acceptance with a transformers-backend reference run."""

    reference_run: str | None = None  # run directory of the reference (same prompts, sampling)
    min_effect: float = Field(default=0.05, ge=0.0)  # flag shortfalls above this relative size


class RunConfig(_Strict):
    name: str = "run"
    backend: Literal["transformers", "vllm", "openai"] = "transformers"
    target: ModelSpec
    draft: DraftSpec
    # More drafters to measure beside `draft` (e.g. n-gram prompt lookup), each over the γ grid.
    extra_drafters: list[DraftSpec] = Field(default_factory=list)
    # γ policies to measure beside the fixed γ grid, with every drafter.
    policies: list[PolicySpec] = Field(default_factory=list)
    workloads: list[WorkloadSpec]
    sampling: SamplingSpec = Field(default_factory=SamplingSpec)
    gammas: list[int] = Field(default_factory=lambda: list(defaults.GAMMAS))
    max_new_tokens: int = Field(default=64, ge=1, le=MAX_NEW_TOKENS)
    stop: list[str] = Field(default_factory=list)  # stop strings (EOS always stops)
    chat_template: Literal["auto", "on", "off"] = "auto"  # auto = on when the tokenizer has one
    warmup: int = Field(default=1, ge=0, le=1_000)  # warm-up prompts per workload, reported apart
    repeats: int = Field(default=1, ge=1, le=MAX_REPEATS)
    # `run` exits 4 ("run incomplete") when more than this share of the prompts failed.
    max_failure_rate: float = Field(default=0.05, ge=0.0, le=1.0)
    seed: int = Field(default=0, ge=0, lt=2**63)
    # torch intra-op threads on CPU (None = torch's default). For tiny models 1 is fastest and,
    # on a busy machine, far steadier: OpenMP threads waiting on a preempted sibling turned a
    # 2 ms decode step into 60 ms here.
    cpu_threads: int | None = Field(default=None, ge=1, le=1024)
    output_dir: str = "reports/run"
    decision: DecisionSpec = Field(default_factory=DecisionSpec)
    engine: EngineSpec = Field(default_factory=EngineSpec)  # backend: vllm
    speculative: SpeculativeSpec = Field(default_factory=SpeculativeSpec)  # backend: vllm
    # engine backends: the numbers of requests kept in flight
    concurrency: list[int] = Field(default_factory=lambda: [1])
    server: ServerSpec = Field(default_factory=ServerSpec)  # backend: openai
    conformance: ConformanceSpec = Field(default_factory=ConformanceSpec)
    economics: EconomicsSpec = Field(default_factory=EconomicsSpec)  # report only

    @model_validator(mode="before")
    @classmethod
    def _engine_defaults(cls, data: Any) -> Any:
        """Engine backends: `speculative.num_speculative_tokens` is the γ grid, and `draft` may be
        left out (it is then described by `speculative`)."""
        if not isinstance(data, dict):
            return data
        spec = data.get("speculative")
        if isinstance(spec, dict) and spec.get("num_speculative_tokens") is not None:
            grid = spec["num_speculative_tokens"]
            grid = [grid] if isinstance(grid, int) else grid
            data = {**data, "speculative": {**spec, "num_speculative_tokens": grid}, "gammas": grid}
        server = data.get("server")
        if data.get("backend") == "openai" and "gammas" not in data and isinstance(server, dict):
            eps = server.get("endpoints") or [server]  # the γ the servers run are the grid
            grid = sorted({int(ep.get("gamma") or 0) for ep in eps if isinstance(ep, dict)} - {0})
            data = {**data, "gammas": grid} if grid else data
        if data.get("backend") in ("vllm", "openai") and "draft" not in data:
            spec = spec if isinstance(spec, dict) else {}
            method = str(spec.get("method", "draft_model" if data["backend"] == "vllm" else ""))
            model = spec.get("model") or method or "as served"
            draft = {"method": "model", "model": model}
            if method == "ngram":
                draft = {"method": "ngram"}
            data = {**data, "draft": draft}
        return data

    @field_validator("chat_template", mode="before")
    @classmethod
    def _yaml_switch(cls, v: Any) -> Any:
        """YAML 1.1 reads unquoted on/off/yes/no as true/false: take them as the user meant."""
        return {True: "on", False: "off"}.get(v, v) if isinstance(v, bool) else v

    @field_validator("concurrency")
    @classmethod
    def _concurrency(cls, v: list[int]) -> list[int]:
        if not v or any(not 1 <= c <= 4096 for c in v):
            raise ValueError("concurrency needs at least one value, each in [1, 4096]")
        return sorted(set(v))

    @field_validator("gammas")
    @classmethod
    def _gammas(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("gammas needs at least one value")
        if any(not 1 <= g <= MAX_GAMMA for g in v):
            raise ValueError(f"gammas must all be in [1, {MAX_GAMMA}]")
        return sorted(set(v))

    @model_validator(mode="after")
    def _logged_sampling(self) -> RunConfig:
        logged = [w.name for w in self.workloads if w.dataset.sampling == "logged"]
        fixed = [k for k in ("temperature", "top_p", "max_tokens") if k in self.server.extra_body]
        if logged and self.backend == "openai" and fixed:  # it would override every request's
            raise ValueError(
                f"workload '{logged[0]}': dataset.sampling: logged sends each request's own "
                f"{fixed[0]}, which server.extra_body overrides; remove it from extra_body"
            )
        return self

    @model_validator(mode="after")
    def _drafter_names(self) -> RunConfig:
        labels = [d.label for d in self.drafters]
        if len(set(labels)) != len(labels):
            raise ValueError("drafters need distinct names: set `name:` on each extra drafter")
        return self

    @property
    def drafters(self) -> list[DraftSpec]:
        return [self.draft, *self.extra_drafters]

    @field_validator("workloads")
    @classmethod
    def _workloads(cls, v: list[WorkloadSpec]) -> list[WorkloadSpec]:
        if not v:
            raise ValueError("workloads needs at least one workload")
        names = [w.name for w in v]
        if len(set(names)) != len(names):
            raise ValueError("workload names must be unique")
        return v


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Valid keys of the (sub)model at a validation-error location, for 'did you mean'."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        ann = field.annotation
        for cand in getattr(ann, "__args__", ()) or (ann,):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                current = cand
                break
        else:
            return []
    return list(getattr(current, "model_fields", {}))


def format_validation_error(err: ValidationError, source: str) -> str:
    """The first validation problem as one actionable line."""
    first = err.errors()[0]
    loc = tuple(first["loc"])
    key = ".".join(str(p) for p in loc) or "(top level)"
    if first["type"] == "extra_forbidden":
        valid = _fields_at(RunConfig, loc)
        near = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        hint = f"; did you mean '{near[0]}'?" if near else f"; valid keys: {', '.join(valid)}"
        return f"{source}: unknown key '{key}'{hint}"
    if first["type"] == "missing":
        return f"{source}: missing required key '{key}'"
    msg = str(first["msg"]).removeprefix("Value error, ")
    got = first.get("input")
    if isinstance(got, bool) and first["type"] in ("string_type", "literal_error", "enum"):
        # YAML 1.1: unquoted yes/no/on/off/true/false are booleans, not words
        msg += "; YAML reads unquoted yes/no/on/off as true/false: quote the word"
    return f"{source}: {key}: {msg} (got {_short(got)})"


def _short(value: Any, limit: int = 80) -> str:
    """A value for a one-line message: its repr, cut to `limit` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


EXTENDS_KEY = "extends"


def _read_yaml_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise SpecbenchError(f"config file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecbenchError(
            f"{path}: not UTF-8 text (byte {exc.start}); save the config as UTF-8"
        ) from None
    except OSError as exc:
        raise SpecbenchError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecbenchError(f"{path}: invalid YAML{where}") from None
    if not isinstance(data, dict):
        raise SpecbenchError(f"{path}: the config must be a YAML mapping of keys to values")
    return data


def read_yaml(path: Path, _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A config file as a dict, with `extends: base.yaml` resolved: the base (a path relative to
    the file that names it) is read first and this file's keys are deep-merged over it, so a
    derived config states only its differences. Chains are followed; a cycle is refused."""
    data = _read_yaml_file(path)
    base_name = data.pop(EXTENDS_KEY, None)
    if base_name is None:
        return data
    if not isinstance(base_name, str) or not base_name.strip():
        raise SpecbenchError(f"{path}: extends: give the base config's path, e.g. tiny.yaml")
    here = path.resolve()
    base = (path.parent / base_name).resolve()
    chain = (*_chain, here)
    if base in chain:
        cycle = " → ".join(p.name for p in (*chain, base))
        raise SpecbenchError(f"{path}: extends: the configs extend each other in a cycle ({cycle})")
    if not base.is_file():
        raise SpecbenchError(f"{path}: extends: base config not found: {base}")
    return deep_merge(read_yaml(base, chain), data)


def parse_config(data: dict[str, Any], source: str = "config") -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise SpecbenchError(format_validation_error(err, source)) from None


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read a YAML config and apply CLI overrides (nested dicts merge key by key)."""
    p = Path(path)
    data = deep_merge(read_yaml(p), overrides or {})
    return parse_config(data, str(p))


def dump_config(cfg: RunConfig) -> str:
    """The resolved config as YAML (what a run stores as DIR/config.yaml)."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
