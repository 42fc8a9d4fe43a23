"""The draft's memory on a serving engine: the KV-cache capacity each engine reports, and the
models' weights and KV bytes per token computed from their files — env.json's `memory` for
`backend: vllm` / `openai` (the transformers runner measures its loaded models instead).

KV capacity, in tokens = num_gpu_blocks × block_size, per engine setting (the server without
speculation and each speculative one), as the engine reports it:
- an OpenAI-compatible vLLM server: the `vllm:cache_config_info` gauge on /metrics, whose labels
  are the engine's CacheConfig fields as text (`num_gpu_blocks="…"`, `block_size="…"`, newer
  vLLM also `kv_cache_size_tokens`); one sample per data-parallel engine, each with the same
  front-end values, so one is read, not summed;
- in-process `vllm.LLM`: `llm.llm_engine.vllm_config.cache_config` (`num_gpu_blocks` is set once
  the engine has profiled its memory).
On `--resume`, a setting whose engine is not started again keeps the capacity the earlier run
recorded (`earlier_capacity`, `with_earlier_capacity`): the openai backend's one-server-per-setting
series measures the baseline server in one run and the speculative one in the next.
The capacity speculation takes, (capacity off − capacity on) / capacity off, is computed in
`analysis.serving.serving_cost.kv_capacity_taken`.

env.json `memory` of an engine run:
    {"source": "engine" | "computed",   # engine: the KV capacity was reported by the engine(s)
     "target": profile | null, "drafts": {draft model: profile},   # model_footprint, computed
     "kv_capacity": [{gamma, label, endpoint, tokens, num_gpu_blocks, block_size,
                      kv_cache_size_tokens}] | null}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specbench.harness.memory.model_footprint import model_footprint
from specbench.harness.serving.metrics.metrics import MetricSamples

CACHE_INFO = "vllm:cache_config_info"


def _int(value: Any) -> int | None:
    """An integer from a label's text or an attribute ("None", "", absent: None)."""
    try:
        n = int(str(value))
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def _capacity(blocks: Any, block_size: Any, size_tokens: Any) -> dict[str, Any] | None:
    n, bs = _int(blocks), _int(block_size)
    if n is None or bs is None:
        return None
    return {
        "tokens": n * bs,
        "num_gpu_blocks": n,
        "block_size": bs,
        "kv_cache_size_tokens": _int(size_tokens),  # vLLM's group-aware count, where reported
    }


def kv_capacity_from_samples(samples: MetricSamples) -> dict[str, Any] | None:
    """KV capacity from a parsed /metrics scrape (`vllm:cache_config_info`); None when absent or
    not yet set (a server still profiling reports num_gpu_blocks="None")."""
    for labels, _ in samples.get(CACHE_INFO, []):
        cap = _capacity(
            labels.get("num_gpu_blocks"),
            labels.get("block_size"),
            labels.get("kv_cache_size_tokens"),
        )
        if cap is not None:
            return cap
    return None


def kv_capacity_from_engine(llm: Any) -> dict[str, Any] | None:
    """KV capacity of an in-process `vllm.LLM`, from its engine's cache config (V1:
    `llm_engine.vllm_config.cache_config`; older engines: `llm_engine.cache_config`); None when
    the engine does not expose it."""
    engine = getattr(llm, "llm_engine", None)
    cc = getattr(getattr(engine, "vllm_config", None), "cache_config", None)
    cc = cc if cc is not None else getattr(engine, "cache_config", None)
    if cc is None:
        return None
    return _capacity(
        getattr(cc, "num_gpu_blocks", None),
        getattr(cc, "block_size", None),
        getattr(cc, "kv_cache_size_tokens", None),
    )


def engine_memory(
    target: str | None,
    drafts: list[str],
    capacities: list[dict[str, Any]],
    *,
    revision: str | None = None,
    dtype: str | None = None,
    kv_dtype: str | None = None,
) -> dict[str, Any] | None:
    """env.json's `memory` for an engine run (module docstring); None when there is nothing: no
    capacity reported and neither model found on this machine."""
    t = (
        model_footprint(target, revision=revision, dtype=dtype, kv_dtype=kv_dtype)
        if target
        else None
    )
    profiles = {name: model_footprint(name, dtype=dtype, kv_dtype=kv_dtype) for name in drafts}
    found = {name: p for name, p in profiles.items() if p is not None}
    if not capacities and t is None and not found:
        return None
    return {
        "source": "engine" if capacities else "computed",
        "target": t,
        "drafts": found,
        "kv_capacity": sorted(capacities, key=lambda c: c["gamma"]) or None,
    }


def earlier_capacity(out_dir: Path) -> list[dict[str, Any]]:
    """The KV capacities an earlier run of this directory wrote to env.json (none: [])."""
    try:
        env = json.loads((out_dir / "env.json").read_text())
    except (OSError, ValueError):
        return []
    caps = ((env if isinstance(env, dict) else {}).get("memory") or {}).get("kv_capacity")
    return [c for c in caps or [] if isinstance(c, dict) and "gamma" in c and "tokens" in c]


def with_earlier_capacity(env: dict[str, Any], earlier: list[dict[str, Any]]) -> dict[str, Any]:
    """env.json with the earlier capacities of the settings this run did not start added."""
    mem = env.get("memory") or {"target": None, "drafts": {}, "kv_capacity": None}
    now = mem.get("kv_capacity") or []
    started = {c["gamma"] for c in now}
    kept = [c for c in earlier if c["gamma"] not in started]
    if not kept:
        return env
    caps = sorted(now + kept, key=lambda c: c["gamma"])
    return {**env, "memory": {**mem, "source": "engine", "kv_capacity": caps}}
