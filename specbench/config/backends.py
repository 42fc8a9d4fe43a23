"""The backend sections of a run configuration and how a backend fills in what it implies.

`backend` picks which sections a run reads: `transformers` (specbench's own loops) none of these,
`vllm` reads `engine` and `speculative`, `openai` reads `server`. Every section is present in the
resolved config whatever the backend (a stored config.yaml carries them all), so the sections are
plain fields of `RunConfig` rather than one union member per backend.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from specbench.config.sections import MAX_GAMMA, StrictModel

Backend = Literal["transformers", "vllm", "openai"]
ENGINE_BACKENDS = ("vllm", "openai")


class EngineSpec(StrictModel):
    """`backend: vllm` engine arguments, passed to `vllm.LLM`; `extra` passes any other vLLM
    EngineArgs field through by name (checked against the installed vLLM)."""

    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    dtype: str | None = None  # None = target.dtype
    max_model_len: int | None = Field(default=None, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0.0, le=1.0)  # None = vLLM's
    enforce_eager: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)


class SpeculativeSpec(StrictModel):
    """`backend: vllm` speculation: vLLM's `speculative_config` minus `num_speculative_tokens`,
    which is the γ grid (`gammas`). `speculative:` may be a list of these (several methods in one
    run, each over its own grid); `label` then tells two entries of one method apart."""

    method: str = "draft_model"  # draft_model, ngram, eagle, eagle3, mtp, suffix, …
    label: str | None = None  # the records' drafter name; default: the method
    model: str | None = None  # the drafter's weights; draft_model defaults to draft.model
    num_speculative_tokens: list[int] | None = None  # the γ grid; given here it replaces gammas
    options: dict[str, Any] = Field(default_factory=dict)  # any other speculative_config key


class EndpointSpec(StrictModel):
    """One OpenAI-compatible server and the speculation setting it was started with."""

    url: str
    gamma: int = Field(default=0, ge=0, le=MAX_GAMMA)  # 0 = the server runs without speculation
    label: str | None = None  # default "<method> γ=<gamma>" ("server γ=<gamma>" without method)
    method: str | None = None  # draft_model, eagle3, ngram, mtp, …; none = no speculation


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
