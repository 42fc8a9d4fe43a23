"""`backend: vllm`: the engine's keyword arguments, built from `engine:` under vLLM's own
EngineArgs names (`engine_args`; the names are recorded in specbench/assets/engine-keys.json from
vLLM 0.32.0), and the config's options checked against the installed vLLM before anything starts
(`check_options`). The parallel layout (tensor and pipeline parallel sizes, the executor) is
passed as given: vLLM places the workers, specbench places nothing (docs/serving.md, "Multi-GPU
and multi-node")."""

from __future__ import annotations

import dataclasses
import difflib
import typing
from typing import Any

from specbench.config import RunConfig, speculative_specs
from specbench.errors import SpecbenchError

CPU_DEFAULT_MEMORY_UTILIZATION = 0.3  # vLLM's default (0.92) refuses to start on a CPU


def _literal_values(tp: Any) -> set[str]:
    """Every string of a (nested) Literal type."""
    out: set[str] = set()
    for arg in typing.get_args(tp):
        if isinstance(arg, str):
            out.add(arg)
        else:
            out |= _literal_values(arg)
    return out


def _unknown(keys: list[str], known: set[str], where: str, version: str) -> None:
    for key in keys:
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            raise SpecbenchError(
                f"{where}.{key}: the installed vLLM {version} has no option '{key}'{hint}"
            )


def check_options(cfg: RunConfig, vllm: Any) -> None:
    """Name a config option the installed vLLM does not know, before starting anything."""
    from vllm.config import SpeculativeConfig
    from vllm.engine.arg_utils import EngineArgs

    version = getattr(vllm, "__version__", "?")
    _unknown(
        list(cfg.engine.extra),
        {f.name for f in dataclasses.fields(EngineArgs)},
        "engine.extra",
        version,
    )
    spec_fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    try:
        from vllm.config.speculative import SpeculativeMethod

        methods = _literal_values(SpeculativeMethod)
    except ImportError:  # older vLLM: no such alias; let vLLM judge the method
        methods = set()
    for spec in speculative_specs(cfg.speculative):
        _unknown(list(spec.options), spec_fields, "speculative.options", version)
        if methods and spec.method not in methods:
            near = difflib.get_close_matches(spec.method, sorted(methods), n=1)
            known = ", ".join(sorted(methods))
            hint = f"; did you mean '{near[0]}'?" if near else f"; known: {known}"
            raise SpecbenchError(
                f"speculative.method: the installed vLLM {version} has no method "
                f"'{spec.method}'{hint}"
            )


def engine_args(cfg: RunConfig, target_path: str, *, on_cpu: bool) -> dict[str, Any]:
    """`vllm.LLM`'s keyword arguments for the target, without speculation: `engine:` under vLLM's
    own EngineArgs names (tests/unit/test_engine_args.py checks them against the list recorded
    in engine-keys.json). The parallel sizes and the executor go in as given: vLLM places the
    workers (one node with mp, a Ray cluster with ray); None leaves vLLM's own choice."""
    e, t = cfg.engine, cfg.target
    kw: dict[str, Any] = {
        "model": target_path,
        "dtype": e.dtype or t.dtype,
        "tensor_parallel_size": e.tensor_parallel_size,
        "pipeline_parallel_size": e.pipeline_parallel_size,
        "enforce_eager": e.enforce_eager,
        "seed": cfg.seed,
        "trust_remote_code": t.trust_remote_code,
        "disable_log_stats": False,  # get_metrics() needs the stat loggers
    }
    if e.distributed_executor_backend is not None:
        kw["distributed_executor_backend"] = e.distributed_executor_backend
    if t.revision is not None:
        kw["revision"] = t.revision
    if e.max_model_len is not None:
        kw["max_model_len"] = e.max_model_len
    util = e.gpu_memory_utilization
    if util is None and on_cpu:
        util = CPU_DEFAULT_MEMORY_UTILIZATION
    if util is not None:
        kw["gpu_memory_utilization"] = util
    kw.update(e.extra)  # any other EngineArgs field (check_options names unknown ones)
    return kw
