"""The backend sections of a run configuration and how a backend fills in what it implies.

`backend` picks which sections a run reads: `transformers` (specbench's own loops) none of these,
`vllm` reads `engine` and `speculative`, `openai` reads `server`. Every section is present in the
resolved config whatever the backend (a stored config.yaml carries them all), so the sections are
plain fields of `RunConfig` rather than one union member per backend.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from specbench.config.sections import MAX_GAMMA, StrictModel

Backend = Literal["transformers", "vllm", "openai"]
ENGINE_BACKENDS = ("vllm", "openai")


MAX_PARALLEL = 1024  # GPUs per tensor- or pipeline-parallel dimension: a bound on what is typed
# vLLM's executors (vllm/config/parallel.py DistributedExecutorBackend, vLLM 0.32.0) that one
# client process can drive; external_launcher is refused (EngineSpec._backend says why)
ExecutorBackend = Literal["mp", "ray", "uni"]


class EngineSpec(StrictModel):
    """`backend: vllm` engine arguments, passed to `vllm.LLM` under vLLM's own EngineArgs names
    (docs/serving.md, "Multi-GPU and multi-node"); `extra` passes any other EngineArgs field
    through by name (checked against the installed vLLM). specbench schedules nothing itself:
    vLLM spreads the model over the tensor × pipeline parallel GPUs, specbench measures."""

    # GPUs each layer is split over (vLLM's tensor_parallel_size; `vllm serve -tp`)
    tensor_parallel_size: int = Field(default=1, ge=1, le=MAX_PARALLEL)
    # stages the layers are split into, e.g. one per node (vLLM's pipeline_parallel_size)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=MAX_PARALLEL)
    # mp: one node; ray: several nodes (a Ray cluster); uni: one GPU; None = vLLM picks
    distributed_executor_backend: ExecutorBackend | None = None
    dtype: str | None = None  # None = target.dtype
    max_model_len: int | None = Field(default=None, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0.0, le=1.0)  # None = vLLM's
    enforce_eager: bool = False
    # every repeat starts every engine afresh, in alternating order (driver.engine_starts)
    interleave: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("distributed_executor_backend", mode="before")
    @classmethod
    def _backend(cls, v: Any) -> Any:
        if v == "external_launcher":
            raise ValueError(
                "external_launcher runs one copy of the program per GPU (torchrun), and each "
                "copy would write the run's records: use mp (one node) or ray (several nodes)"
            )
        return v

    @model_validator(mode="after")
    def _parallel(self) -> EngineSpec:
        own = sorted(set(self.extra) & set(EngineSpec.model_fields) - {"extra", "interleave"})
        if own:
            raise ValueError(
                f"extra.{own[0]}: give it as engine.{own[0]} (the memory plan and the "
                "exported flags read it there)"
            )
        world = self.tensor_parallel_size * self.pipeline_parallel_size
        if self.distributed_executor_backend == "uni" and world > 1:
            raise ValueError(
                f"distributed_executor_backend uni runs one process on one GPU, but "
                f"tensor_parallel_size × pipeline_parallel_size = {world}: use mp or ray"
            )
        return self


MAX_SCHEDULE_BATCH = 1 << 20


def check_schedule(entries: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """vLLM's rules for a batch-size schedule (vllm/v1/spec_decode/dynamic/utils.py), plus
    bounds: inclusive ranges [lo, hi] with 1 ≤ lo ≤ hi, sorted, not overlapping, the first
    starting at 1; each k in [0, MAX_GAMMA] and at least one k > 0 (vLLM needs
    num_speculative_tokens = max k > 0 beside a schedule)."""
    if not entries or len(entries) > 64:
        raise ValueError("speculative.schedule needs 1 to 64 [lo, hi, k] entries")
    out = sorted((int(lo), int(hi), int(k)) for lo, hi, k in entries)
    prev = 0
    for lo, hi, k in out:
        if not 1 <= lo <= hi <= MAX_SCHEDULE_BATCH:
            raise ValueError(f"speculative.schedule: range [{lo}, {hi}] needs 1 <= lo <= hi")
        if lo <= prev:
            raise ValueError(f"speculative.schedule: range [{lo}, {hi}] overlaps the one before")
        if not 0 <= k <= MAX_GAMMA:
            raise ValueError(f"speculative.schedule: k={k} must be in [0, {MAX_GAMMA}]")
        prev = hi
    if out[0][0] != 1:
        raise ValueError("speculative.schedule: the first range must start at batch size 1")
    if max(k for _, _, k in out) == 0:
        raise ValueError(
            "speculative.schedule: every k is 0; that is the baseline (no speculation)"
        )
    return out


class SpeculativeSpec(StrictModel):
    """`backend: vllm` speculation: vLLM's `speculative_config` minus `num_speculative_tokens`,
    which is the γ grid (`gammas`). `speculative:` may be a list of these (several methods in one
    run, each over its own grid); `label` then tells two entries of one method apart."""

    method: str = "draft_model"  # draft_model, ngram, eagle, eagle3, mtp, suffix, …
    label: str | None = None  # the records' drafter name; default: the method
    model: str | None = None  # the drafter's weights; draft_model defaults to draft.model
    num_speculative_tokens: list[int] | None = None  # the γ grid; given here it replaces gammas
    options: dict[str, Any] = Field(default_factory=dict)  # any other speculative_config key
    # one more engine setting, labelled "schedule": γ by batch size, [[lo, hi, k], …] (vLLM's
    # num_speculative_tokens_per_batch_size), or read from a schedule file (`schedule_from`)
    schedule: list[tuple[int, int, int]] | None = None
    schedule_from: str | None = None

    @field_validator("num_speculative_tokens")
    @classmethod
    def _grid(cls, v: list[int] | None) -> list[int] | None:
        return None if v is None else sorted(set(v))  # a repeated γ is measured once

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: list[tuple[int, int, int]] | None) -> list[tuple[int, int, int]] | None:
        return None if v is None else check_schedule(v)

    @model_validator(mode="after")
    def _one_schedule(self) -> SpeculativeSpec:
        if self.schedule is not None and self.schedule_from is not None:
            raise ValueError("give speculative.schedule or speculative.schedule_from, not both")
        if "num_speculative_tokens_per_batch_size" in self.options:
            raise ValueError(
                "speculative.options.num_speculative_tokens_per_batch_size: give it as "
                "speculative.schedule (measured as its own setting beside the fixed γ values)"
            )
        return self


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")  # an HTTP token (RFC 9110 §5.1)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def _header_names(headers: dict[str, str]) -> dict[str, str]:
    """`headers`: header name → the NAME of the environment variable holding its value."""
    if len(headers) > 32:
        raise ValueError(f"at most 32 headers, got {len(headers)}")
    for name, env in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"'{name[:100]}' is not an HTTP header name")
        if not _ENV_NAME.fullmatch(env):
            raise ValueError(
                f"header {name}: give the name of an environment variable holding its value "
                f"(letters, digits, _), not the value itself"
            )
    return headers


# header name → environment variable name (values are never written in a config)
Headers = Annotated[dict[str, str], AfterValidator(_header_names)]


class EndpointSpec(StrictModel):
    """One OpenAI-compatible server and the speculation setting it was started with."""

    url: str
    gamma: int = Field(default=0, ge=0, le=MAX_GAMMA)  # 0 = the server runs without speculation
    label: str | None = None  # default "<method> γ=<gamma>" ("server γ=<gamma>" without method)
    method: str | None = None  # draft_model, eagle3, ngram, mtp, …; none = no speculation
    headers: Headers = Field(default_factory=dict)  # added to the server's `headers`
    metrics_url: str | None = None  # this server's /metrics; default: <its origin>/metrics


class ServerSpec(StrictModel):
    """`backend: openai`: the server(s) measured. specbench changes no speculation setting on a
    server: run one server per setting and say here what each runs (`gamma`, `label`)."""

    url: str = "http://127.0.0.1:8000"  # base URL (with or without /v1)
    gamma: int = Field(default=0, ge=0, le=MAX_GAMMA)
    label: str | None = None
    method: str | None = None  # as in endpoints[*]
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
    headers: Headers = Field(default_factory=dict)  # sent with every request, values from env
    max_retry_after_s: float = Field(default=60.0, ge=0.0, le=3600.0)  # cap on a Retry-After wait
    max_requests: int | None = Field(default=None, ge=1, le=10_000_000)  # requests sent, retries in


def engine_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """What an engine backend implies before validation: `speculative.num_speculative_tokens` is
    the γ grid; `backend: openai` without `gammas` takes the γ its servers run; and `draft` may be
    left out (it is then described by `speculative`)."""
    spec = data.get("speculative")
    if isinstance(spec, dict) and spec.get("num_speculative_tokens") is not None:
        grid = spec["num_speculative_tokens"]
        grid = [grid] if isinstance(grid, int) else grid
        data = {**data, "speculative": {**spec, "num_speculative_tokens": grid}, "gammas": grid}
    if isinstance(spec, list) and spec and all(isinstance(s, dict) for s in spec):
        items = [
            {**s, "num_speculative_tokens": [n] if isinstance(n, int) else n}
            if (n := s.get("num_speculative_tokens")) is not None
            else s
            for s in spec
        ]
        data = {**data, "speculative": items}
        grids = [s.get("num_speculative_tokens") for s in items]
        if all(isinstance(g, list) for g in grids) and "gammas" not in data:
            data["gammas"] = sorted({int(g) for grid in grids for g in grid})  # type: ignore[union-attr]
        spec = items[0]
    server = data.get("server")
    if data.get("backend") == "openai" and "gammas" not in data and isinstance(server, dict):
        eps = server.get("endpoints") or [server]  # the γ the servers run are the grid
        grid = sorted({int(ep.get("gamma") or 0) for ep in eps if isinstance(ep, dict)} - {0})
        data = {**data, "gammas": grid} if grid else data
    if data.get("backend") in ENGINE_BACKENDS and "draft" not in data:
        spec = spec if isinstance(spec, dict) else {}
        method = str(spec.get("method", "draft_model" if data["backend"] == "vllm" else ""))
        model = spec.get("model") or method or "as served"
        draft = {"method": "model", "model": model}
        if method == "ngram":
            draft = {"method": "ngram"}
        data = {**data, "draft": draft}
    return data


def speculative_specs(spec: SpeculativeSpec | list[SpeculativeSpec]) -> list[SpeculativeSpec]:
    """`speculative:` as a list (the single-mapping form is a list of one)."""
    return list(spec) if isinstance(spec, list) else [spec]


def speculative_label(spec: SpeculativeSpec) -> str:
    """The drafter name an in-process setting's records carry: `label`, else the method."""
    return spec.label or spec.method
