"""The measured engine's parallel layout and execution mode in SGLang's and TensorRT-LLM's own keys:
vLLM's EngineArgs as env.json's `engine_args` records them, mapped through one table (`LAYOUT_MAP`)
to SGLang's ServerArgs flags and TensorRT-LLM's LLM-API keys, each name one recorded in
`specbench/assets/engine-keys.json` (`sglang.parallel`, `trtllm.parallel`) from the engines' source
at the commits named there (docs/serving.md, "The same layout on SGLang and TensorRT-LLM").

A vLLM setting away from its default that an engine has no equivalent for is never dropped
silently: it comes back as a `# …` note for stderr naming what was not carried and why.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from specbench.report.schedule.engine_keys import engine_keys


@dataclass(frozen=True)
class Equivalent:
    """One vLLM key's counterpart: SGLang's ServerArgs fields, TensorRT-LLM's LLM-API key (None:
    no equivalent, `why` says what the engine does instead)."""

    sglang: tuple[str, ...]
    trtllm: str | None
    why_sglang: str = ""
    why_trtllm: str = ""


_DP_REPLICAS = "replicas there are separate servers (measure them with backend: openai)"
_DP_SGLANG = (
    "its dp_size keeps the replicas inside one launch: no per-node rank, address or backend"
)
_MPI = "MPI does the rendezvous of a multi-node world"
# vLLM EngineArgs key → its equivalents (the values: `sglang_layout` / `trtllm_layout`)
LAYOUT_MAP: dict[str, Equivalent] = {
    "tensor_parallel_size": Equivalent(("tp_size",), "tensor_parallel_size"),
    "pipeline_parallel_size": Equivalent(("pp_size",), "pipeline_parallel_size"),
    "data_parallel_size": Equivalent(("dp_size",), None, why_trtllm=_DP_REPLICAS),
    "decode_context_parallel_size": Equivalent(
        ("dcp_size",),
        None,
        why_trtllm="its context_parallel_size is another scheme (cp_config), not vLLM's decode "
        "context parallel",
    ),
    "prefill_context_parallel_size": Equivalent(
        (),
        None,
        why_sglang="its prefill context parallel is a switch (--enable-prefill-cp), not a size",
        why_trtllm="its context_parallel_size is another scheme (cp_config)",
    ),
    "nnodes": Equivalent(("nnodes",), None, why_trtllm=_MPI),
    "node_rank": Equivalent(("node_rank",), None, why_trtllm=_MPI),
    # SGLang takes node 0's address and port as one HOST:PORT
    "master_addr": Equivalent(("dist_init_addr",), None, why_trtllm=_MPI),
    "master_port": Equivalent(("dist_init_addr",), None, why_trtllm=_MPI),
    # ray → TensorRT-LLM's orchestrator_type: ray; vLLM's mp / uni are its MPI default
    "distributed_executor_backend": Equivalent(
        (),
        "orchestrator_type",
        why_sglang="no executor setting mapped: it starts its own worker processes",
    ),
    "data_parallel_size_local": Equivalent((), None, _DP_SGLANG, _DP_REPLICAS),
    "data_parallel_start_rank": Equivalent((), None, _DP_SGLANG, _DP_REPLICAS),
    "data_parallel_address": Equivalent((), None, _DP_SGLANG, _DP_REPLICAS),
    "data_parallel_rpc_port": Equivalent((), None, _DP_SGLANG, _DP_REPLICAS),
    "data_parallel_backend": Equivalent((), None, _DP_SGLANG, _DP_REPLICAS),
    # eager (no CUDA graphs): SGLang's two phase switches, TensorRT-LLM's cuda_graph_config: null
    "enforce_eager": Equivalent(
        ("disable_prefill_cuda_graph", "disable_decode_cuda_graph"), "cuda_graph_config"
    ),
}
# vLLM speculative options about the layout (SpeculativeConfig): no counterpart in either engine
DRAFT_LAYOUT = ("draft_tensor_parallel_size",)


@dataclass(frozen=True)
class Layout:
    """An engine's flags ((flag, value); value "" for a bare flag) or keys, and the notes."""

    flags: list[tuple[str, str]] = field(default_factory=list)
    keys: dict[str, JsonValue] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


Scalar = int | float | str | bool  # an EngineArgs value of the layout (env.json engine_args)


def measured(engine_args: Mapping[str, Any] | None) -> dict[str, Scalar]:
    """The layout keys set away from vLLM's default (engine-keys.json `serve_flag_defaults`)."""
    defaults = engine_keys().vllm_engine_args.serve_flag_defaults
    return {
        k: v
        for k, v in (engine_args or {}).items()
        if k in LAYOUT_MAP and isinstance(v, Scalar) and v != defaults.get(k)
    }


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")  # SGLang's rule (engine-keys.json sglang.flag_rule)


def _not_carried(engine: str, why: dict[str, str]) -> list[str]:
    return [f"# {engine}: vLLM's {k} not carried ({w})" for k, w in why.items()]


def sglang_layout(engine_args: Mapping[str, Any] | None) -> Layout:
    """SGLang's launch_server flags for the measured layout (module docstring)."""
    rec = engine_keys().sglang.parallel
    got = measured(engine_args)
    flags: list[tuple[str, str]] = []
    why: dict[str, str] = {}
    for key, value in got.items():
        eq = LAYOUT_MAP[key]
        if not eq.sglang:
            why[key] = f"{value}: {eq.why_sglang}"
        elif key == "enforce_eager":
            flags += [(_flag(k), "") for k in eq.sglang if k in rec.bool_keys] if value else []
        elif eq.sglang == ("dist_init_addr",):
            if int(got.get("nnodes") or 1) <= 1:  # else one HOST:PORT below
                why[key] = f"{value}: one node, SGLang needs no rendezvous address"
        else:
            flags.append((_flag(eq.sglang[0]), str(value)))
    nnodes = int(got.get("nnodes") or 1)
    notes = _not_carried("SGLang", why)
    if nnodes > 1:
        defaults = engine_keys().vllm_engine_args.serve_flag_defaults
        host = (engine_args or {}).get("master_addr") or defaults["master_addr"]
        port = (engine_args or {}).get("master_port") or defaults["master_port"]
        flags.append((_flag("dist_init_addr"), f"{host}:{port}"))
        notes.append(
            f"# SGLang: this is node {int(got.get('node_rank') or 0)}'s line of {nnodes}: on node "
            f"i (0 … {nnodes - 1}) run the same line with --node-rank i"
        )
    return Layout(flags=flags, notes=notes)


def trtllm_layout(engine_args: Mapping[str, Any] | None) -> Layout:
    """TensorRT-LLM's top-level LLM-API keys for the measured layout (module docstring)."""
    got = measured(engine_args)
    keys: dict[str, JsonValue] = {}
    why: dict[str, str] = {}
    for key, value in got.items():
        eq = LAYOUT_MAP[key]
        if eq.trtllm is None:
            why[key] = f"{value}: {eq.why_trtllm}"
        elif key == "enforce_eager":
            if value:
                keys[eq.trtllm] = None  # TorchLlmArgs: no CUDA graphs
        elif key == "distributed_executor_backend":
            if value == "ray":
                keys[eq.trtllm] = "ray"
            else:  # mp / uni: worker processes on this node, as TensorRT-LLM's MPI default
                why[key] = f"{value}: TensorRT-LLM's default (MPI) starts the workers"
        else:
            keys[eq.trtllm] = int(value)
    notes = _not_carried("TensorRT-LLM", why)
    if keys.get("orchestrator_type") == "ray":
        notes.append("# TensorRT-LLM: orchestrator_type ray is a prototype there (llm_args.py)")
    nnodes = int(got.get("nnodes") or 1)
    if nnodes > 1:
        world = int(got.get("tensor_parallel_size") or 1) * int(
            got.get("pipeline_parallel_size") or 1
        )
        notes.append(
            f"# TensorRT-LLM: the {nnodes} nodes are one MPI world of {world} processes (tensor × "
            f"pipeline parallel), started together: e.g. srun -N {nnodes} --ntasks-per-node "
            f"{max(world // nnodes, 1)} --mpi=pmix trtllm-llmapi-launch trtllm-serve … "
            "(its examples/llm-api/llm_mgmn_trtllm_serve.sh)"
        )
    return Layout(keys=keys, notes=notes)


def draft_layout_notes(engine: str, options: Mapping[str, Any]) -> list[str]:
    """vLLM speculative options about the draft's layout that `engine` has no key for."""
    return [
        f"# {engine}: vLLM's speculative option {k}={options[k]} not carried (no equivalent key)"
        for k in DRAFT_LAYOUT
        if options.get(k) is not None
    ]


def flags_text(flags: list[tuple[str, str]]) -> str:
    return "".join(f" {f} {shlex.quote(v)}" if v else f" {f}" for f, v in flags)
