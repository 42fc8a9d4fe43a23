"""Whether a config's models fit its GPUs, before anything loads (`validate --gpu-memory`).

Each model is built from its config.json on PyTorch's meta device (`models.meta`): exact weight
bytes, KV bytes per token. The config.json is the local one (a model directory or the Hugging
Face cache) or, for the models the shipped configs name, specbench's copy of the public one
(specbench/assets/model-configs; the output says which). Nothing is downloaded or loaded.

Per GPU (docs/theory.md §12):

- `backend: transformers` (batch 1): every model's weights and its KV cache for `context` tokens.
  When the target has a device_map, it and each draft with a device_map are spread over `gpus`
  (accelerate balances whole layers over every GPU: the even share, within 1.25 × the model's
  largest layer); a draft without one sits whole on GPU 0 beside the target's share. Without a
  target device_map everything is on one GPU;
- `backend: vllm`: the target's weights / (tensor × pipeline parallel), each draft model's /
  its draft_tensor_parallel_size (default: the target's), within gpu_memory_utilization (vLLM's
  default 0.9) of the GPU; KV heads split over the tensor-parallel ranks (a head is never split)
  and layers over the pipeline stages; the engine refuses to start unless one max_model_len
  sequence fits. vLLM builds the drafter on the last pipeline stage only (pipeline parallel 1,
  its own tensor parallel size), so the plan is that stage's GPUs: the busiest. An EAGLE-3 head
  (`models.meta.eagle3_head_profile`: its fc, one decoder layer, its own lm_head over
  `draft_vocab_size`, the d2t/t2d maps; the input embedding is the target's) is planned like a
  draft model, its layer's KV in the same cache, its fc, norms and maps whole on
  every rank. Several methods start one engine at a time: the one needing the most per GPU
  (weights + KV for the context) is planned, and the others are listed beside it.

Not counted, and said so: activations and the sampler's logits, CUDA graphs, the CUDA context
(about 0.5–1 GiB per GPU), and the heads of other methods (EAGLE-1, Medusa, MLP speculator, MTP).
A plan that does not fit without them cannot fit with them, which is why `validate` fails on it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from specbench.config import RunConfig
from specbench.errors import SpecbenchError
from specbench.harness.memory.model_footprint import local_model_dir
from specbench.models.meta import MetaProfile, eagle3_head_profile, meta_profile

GIB = 1 << 30
SHIPPED_CONFIGS = Path(__file__).resolve().parents[2] / "assets" / "model-configs"
DEFAULT_CONTEXT_TOKENS = 8192  # transformers backend: the batch-1 context planned by default
VLLM_DEFAULT_UTILIZATION = 0.9
# memory.total as nvidia-smi reports it, MiB, for `--gpu NAME` (`--gpu-memory` for any other)
GPU_MEMORY_MIB = {
    "A10G": 23028,
    "L4": 23034,
    "RTX4090": 24564,
    "A100-40GB": 40960,
    "L40S": 46068,
    "A100-80GB": 81920,
    "H100-80GB": 81559,
    "H200": 143771,
}
HEAD_METHODS = ("eagle", "medusa", "mlp_speculator", "mtp")  # not counted (module docstring)
MODEL_FREE = ("ngram", "suffix", "none")


def gpu_bytes(name: str) -> int:
    key = name.strip().upper().replace(" ", "")
    if key not in GPU_MEMORY_MIB:
        known = ", ".join(GPU_MEMORY_MIB)
        raise SpecbenchError(f"unknown GPU '{name}'; use one of {known}, or --gpu-memory GIB")
    return GPU_MEMORY_MIB[key] << 20


def find_config(name: str, revision: str | None = None) -> tuple[dict[str, Any], str] | None:
    """(config.json, where it came from) for a model name; None when neither local nor shipped."""
    local = local_model_dir(name, revision)
    path, source = (local / "config.json", "local") if local else (None, "")
    if path is None:
        shipped = SHIPPED_CONFIGS / name.replace("/", "--") / "config.json"
        path, source = (shipped, "shipped copy") if shipped.is_file() else (None, "")
    if path is None:
        return None
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError):
        raise SpecbenchError(f"{path}: not a readable config.json") from None
    return (cfg.get("text_config") or cfg), source


def _dtype(name: str | None) -> torch.dtype:
    # "auto" is bf16 on a GPU (models/load.py pick_dtype); fp16 on the few without bf16
    return {"float32": torch.float32, "float16": torch.float16}.get(name or "", torch.bfloat16)


@dataclass(frozen=True)
class PlannedModel:
    role: str  # "target", "draft", a method label
    name: str
    source: str  # "local" | "shipped copy"
    profile: MetaProfile
    shards: int  # tensor-parallel ranks × pipeline stages its weights are split over
    kv_split: int  # ranks its KV heads are split over (≤ its KV heads)
    layer_stages: int = 1  # pipeline stages its layers are split over

    @property
    def weights_per_gpu(self) -> int:
        whole = self.profile.replicated_bytes
        return math.ceil((self.profile.weight_bytes - whole) / self.shards) + whole

    @property
    def kv_per_token_per_gpu(self) -> int:
        kv = self.profile.kv_bytes_per_token_modules
        return math.ceil(kv / self.kv_split / self.layer_stages)


@dataclass
class MemoryPlan:
    gpus: int
    gpu_bytes: int
    gpu_source: str  # "--gpu-memory" or the GPU name
    usable_fraction: float
    context_tokens: int
    context_source: str
    models: list[PlannedModel] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # models without a config.json here
    not_counted: list[str] = field(default_factory=list)
    # methods whose engine needs less per GPU than the planned one (one engine at a time)
    smaller_engines: list[PlannedModel] = field(default_factory=list)
    layout: str = ""  # vllm: how the GPUs are used, e.g. "tensor parallel 4 × pipeline parallel 2"

    @property
    def usable_bytes(self) -> int:
        return int(self.gpu_bytes * self.usable_fraction)

    @property
    def weights_per_gpu(self) -> int:
        return sum(m.weights_per_gpu for m in self.models)

    @property
    def kv_per_token_per_gpu(self) -> int:
        return sum(m.kv_per_token_per_gpu for m in self.models)

    @property
    def needed_bytes(self) -> int:
        return self.weights_per_gpu + self.kv_per_token_per_gpu * self.context_tokens

    @property
    def fits(self) -> bool | None:
        return None if self.missing else self.needed_bytes <= self.usable_bytes

    @property
    def kv_capacity_tokens(self) -> int:
        spare = self.usable_bytes - self.weights_per_gpu
        return max(spare, 0) // max(self.kv_per_token_per_gpu, 1)

    def summary(self) -> str:
        gib = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
        head = (
            f"memory plan: {self.gpus} × {gib(self.gpu_bytes)} GPU ({self.gpu_source})"
            + (f" as {self.layout}" if self.layout else "")
            + ", "
            f"{100 * self.usable_fraction:.0f} % usable = {gib(self.usable_bytes)} each"
        )
        if self.missing:
            return f"{head}; no verdict: no config.json here for {', '.join(self.missing)}"
        parts = ", ".join(_describe(m) for m in self.models)
        kv = self.kv_per_token_per_gpu
        verdict = (
            f"fits, {gib(self.usable_bytes - self.needed_bytes)} left per GPU "
            f"(KV room ≈ {self.kv_capacity_tokens:,} tokens)"
            if self.fits
            else f"does NOT fit: {gib(self.needed_bytes)} needed per GPU"
        )
        tail = ""
        if self.smaller_engines:
            tail += "; smaller engines, started one at a time: " + ", ".join(
                _describe(m) for m in self.smaller_engines
            )
        tail += f"; not counted: {', '.join(self.not_counted)}" if self.not_counted else ""
        return (
            f"{head}: weights {gib(self.weights_per_gpu)} per GPU [{parts}]; KV cache "
            f"{kv / 1024:.0f} KiB per token per GPU × {self.context_tokens:,} tokens "
            f"({self.context_source}) = {gib(kv * self.context_tokens)}: {verdict}{tail}"
        )


def _describe(m: PlannedModel) -> str:
    return (
        f"{m.role} {m.name} {m.profile.weight_bytes / GIB:.1f} GiB"
        + (f" / {m.shards}" if m.shards > 1 else "")
        + f" ({m.profile.n_params / 1e9:.2f} B params, {m.profile.dtype}, {m.source})"
    )


def _model(
    plan: MemoryPlan,
    role: str,
    name: str,
    revision: str | None,
    dtype: torch.dtype,
    eagle3: bool = False,
) -> MetaProfile | None:
    found = find_config(name, revision)
    if found is None:
        plan.missing.append(name)
        return None
    cfg, source = found
    profile = (eagle3_head_profile if eagle3 else meta_profile)(cfg, dtype)
    plan.models.append(PlannedModel(role, name, source, profile, 1, 1))
    return profile


def plan_memory(
    cfg: RunConfig,
    gpu_bytes_each: int,
    gpu_source: str,
    gpus: int | None = None,
    context_tokens: int | None = None,
) -> MemoryPlan:
    """The memory plan of a run config on GPUs of `gpu_bytes_each` (module docstring)."""
    not_counted = ["activations", "CUDA graphs", "the CUDA context"]
    if cfg.backend == "vllm":
        eng = cfg.engine
        tp, pp = eng.tensor_parallel_size, eng.pipeline_parallel_size
        plan = MemoryPlan(
            tp * pp,
            gpu_bytes_each,
            gpu_source,
            eng.gpu_memory_utilization or VLLM_DEFAULT_UTILIZATION,
            context_tokens or eng.max_model_len or 0,
            "--context-tokens" if context_tokens else "engine.max_model_len",
            not_counted=not_counted,
            layout=f"tensor parallel {tp} × pipeline parallel {pp}" if tp * pp > 1 else "",
        )
        dtype = _dtype(eng.dtype or cfg.target.dtype)
        target = _model(plan, "target", cfg.target.model, cfg.target.revision, dtype)
        if target is not None:
            m = plan.models[-1]
            kv_split = min(tp, target.n_kv_heads or 1)
            plan.models[-1] = PlannedModel(
                m.role, m.name, m.source, m.profile, tp * pp, kv_split, pp
            )
            if not plan.context_tokens:
                found = find_config(cfg.target.model, cfg.target.revision)
                plan.context_tokens = int((found or ({}, ""))[0].get("max_position_embeddings", 0))
                plan.context_source = "the target's max_position_embeddings"
        specs = cfg.speculative if isinstance(cfg.speculative, list) else [cfg.speculative]
        engines: list[PlannedModel] = []
        for spec in specs:
            if spec.method in MODEL_FREE:
                continue
            if spec.method in HEAD_METHODS:
                plan.not_counted.append(f"the {spec.method} head {spec.model or ''}".strip())
                continue
            head = spec.method == "eagle3"
            name = spec.model or cfg.draft.model
            # an EAGLE-3 head is named by spec.model; draft.revision belongs to draft.model
            rev = None if head and spec.model else cfg.draft.revision
            draft_tp = int(spec.options.get("draft_tensor_parallel_size") or tp)
            profile = _model(plan, spec.label or spec.method, name, rev, dtype, eagle3=head)
            if profile is None:
                continue
            m = plan.models.pop()
            kv_split = min(draft_tp, profile.n_kv_heads or 1)
            engines.append(PlannedModel(m.role, m.name, m.source, m.profile, draft_tp, kv_split))
        if engines:
            # the per-GPU need of each method's engine beside the target: the largest is planned
            ctx = plan.context_tokens
            engines.sort(
                key=lambda e: e.weights_per_gpu + e.kv_per_token_per_gpu * ctx, reverse=True
            )
            plan.models.append(engines[0])
            plan.smaller_engines = engines[1:]
        return plan
    # without a device_map every model sits on the one device of `device`; with device_map: auto
    # accelerate balances each model over every GPU it sees (docs/configuration.md), so the even
    # share is the plan. The busiest GPU holds up to 1.25 × the model's largest whole unit (a
    # decoder layer, the embedding or lm_head) more than its share: accelerate's own slack,
    # checked against its planner in tests/models/test_device_map.py.
    n = (gpus or 1) if cfg.target.device_map else 1
    plan = MemoryPlan(
        n,
        gpu_bytes_each,
        gpu_source,
        1.0,
        context_tokens or DEFAULT_CONTEXT_TOKENS,
        "--context-tokens" if context_tokens else "default; --context-tokens",
        not_counted=[*not_counted, "batch_timing's larger batches"],
    )
    spread: list[int] = []  # the GPUs each planned model's weights are split over
    if _model(plan, "target", cfg.target.model, cfg.target.revision, _dtype(cfg.target.dtype)):
        spread.append(n)
    for d in cfg.drafters:
        if d.method != "model" or not d.model:
            continue
        if _model(plan, f"draft {d.label}", d.model, d.revision, _dtype(d.dtype)):
            # a draft without a device_map sits whole on its one device (GPU 0 by default,
            # where the target's first layers are too): the busiest GPU carries all of it
            spread.append(n if d.device_map else 1)
    plan.models = [
        PlannedModel(m.role, m.name, m.source, m.profile, k, k)
        for m, k in zip(plan.models, spread, strict=True)
    ]
    return plan
