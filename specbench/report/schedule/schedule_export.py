"""The γ schedule written in each engine's own configuration (`specbench schedule`, docs/schedule.md),
with the flags that start a server with it. Every key written is one of the engine's own config
classes at the commit recorded in `specbench/assets/engine-keys.json` (docs/serving.md names the
versions; tests/unit/test_engine_exports.py checks every exported key against that list).

- vLLM: `vllm serve MODEL [--tensor-parallel-size N --pipeline-parallel-size N
  --distributed-executor-backend X --nnodes N …] --speculative-config '{…}'`, the parallel and
  multi-node flags those of the measured in-process engine (when not vLLM's defaults; the list
  recorded in engine-keys.json `vllm_engine_args.serve_flags`), the JSON being vLLM's `SpeculativeConfig`:
  the run's method, draft and options, `num_speculative_tokens` = the largest k (vLLM clamps each
  k to it) and, when k changes with the batch size, `num_speculative_tokens_per_batch_size:
  [[lo, hi, k], …]` (inclusive ranges from 1; k = 0 allowed; vLLM clamps hi to `max_num_seqs`).
- SGLang: `python -m sglang.launch_server --model-path MODEL [--tp-size N --pp-size N …]
  --speculative-algorithm A [--speculative-draft-model-path D] --speculative-num-steps γ
  --speculative-eagle-topk 1 --speculative-num-draft-tokens γ+1` (a chain: topk 1, the verify
  window γ + 1), the measured layout in SGLang's own flags (`parallel_layout`). SGLang takes
  one γ per server, so a schedule whose k changes is written at one operating concurrency.
- TensorRT-LLM: the LLM API options for `trtllm-serve --extra_llm_api_options` (YAML): the
  measured layout's top-level keys (`tensor_parallel_size`, …: `parallel_layout`) and
  `speculative_config`: `decoding_type`, `max_draft_len`, `speculative_model` (draft or EAGLE
  head), the method's settings and `draft_len_schedule {b: k}`, each key the upper end of a range (at the
  recorded commit: a batch of size b uses the value of the smallest key ≥ b, 0 past the last;
  the smallest key's value must be `max_draft_len`, so a schedule whose k at batch 1 is not its
  largest cannot be written). Older releases read the keys as lower thresholds.
- neutral JSON: the ranges, each measured concurrency's decision with its intervals, the boundary
  rules and the run's provenance.

"Off" (k = 0) inside a speculative engine still loads the draft and may pay some of its overhead;
the run measured "off" as an engine without speculation (docs/theory.md §11).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from specbench.analysis.decide.gamma_schedule import gamma_at
from specbench.analysis.documents.results_model_engine import GammaSchedule
from specbench.errors import SpecbenchError
from specbench.report.schedule.engine_keys import engine_keys

Ranges = Sequence[Sequence[int]]
NEUTRAL_SCHEMA = 2  # 2: "goodput" → "throughput" keys (closed-loop tokens/s; SLO goodput apart)
# vLLM's method → SGLang's --speculative-algorithm (a chain drafter each); the n-gram and suffix
# drafters of SGLang build trees of --speculative-num-draft-tokens, not a γ-chain: not mapped
SGLANG_ALGORITHM = {
    "draft_model": "STANDALONE",
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
}
# vLLM's method → TensorRT-LLM's decoding_type
TRTLLM_DECODING_TYPE = {
    "draft_model": "Draft_Target",
    "eagle": "Eagle",
    "eagle3": "Eagle3",
    "mtp": "MTP",
    "ngram": "NGram",
}
NEEDS_DRAFT = ("draft_model", "eagle", "eagle3")  # the others draft from the target itself


@dataclass(frozen=True)
class Deployment:
    """What a server needs beside γ: the target, the method, the draft (weights or EAGLE head),
    and the run's other vLLM speculative_config keys."""

    target: str
    method: str
    draft: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_vllm(cls, target: str, conf: Mapping[str, Any]) -> Deployment:
        skip = {
            "method",
            "model",
            "num_speculative_tokens",
            "num_speculative_tokens_per_batch_size",
        }
        return cls(
            target,
            str(conf.get("method") or "draft_model"),
            None if conf.get("model") is None else str(conf["model"]),
            {k: v for k, v in conf.items() if k not in skip},
        )


def is_off_everywhere(ranges: Ranges) -> bool:
    """k = 0 in every range (or no range): the server without speculation, not a schedule."""
    return not any(int(k) > 0 for _, _, k in ranges)


def _check(ranges: Ranges) -> None:
    if is_off_everywhere(ranges):
        raise SpecbenchError(
            "the schedule is off at every measured concurrency: serve without speculation "
            "(--format json writes the decisions)"
        )


def vllm_speculative_config(
    ranges: Ranges, base: Mapping[str, JsonValue] | None
) -> dict[str, JsonValue]:
    """`base` (the run's speculative_config: method, model, options) with the schedule; one
    range (the same k at every batch size) is the plain fixed-γ config. A JSON document (the
    `--speculative-config` value)."""
    _check(ranges)
    conf: dict[str, JsonValue] = {
        k: v for k, v in (base or {}).items() if k != "num_speculative_tokens_per_batch_size"
    }
    conf["num_speculative_tokens"] = max(int(k) for _, _, k in ranges)
    if len(ranges) > 1:
        conf["num_speculative_tokens_per_batch_size"] = [[int(x) for x in r] for r in ranges]
    return conf


def vllm_parallel_flags(engine_args: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The `vllm serve` flags of the run's parallel and multi-node layout (env.json's engine_args
    of an in-process run: tensor, pipeline, data and context parallel sizes, the executor, the
    multi-node `mp` rendezvous) and its execution mode (`--enforce-eager`: a run measured without
    CUDA graphs or compilation is pasted so; value ""), each as recorded in engine-keys.json's
    `vllm_engine_args.serve_flags` from vLLM's own parser; those at vLLM's default
    (`serve_flag_defaults`) are left off."""
    rec = engine_keys().vllm_engine_args
    out = []
    for key, flag in rec.serve_flags.items():
        value = (engine_args or {}).get(key)
        if value is None or value == rec.serve_flag_defaults[key]:
            continue
        if key in rec.serve_bool_flags:  # the bare flag (vLLM's BooleanOptionalAction)
            out.append((str(flag) if value else f"--no-{str(flag)[2:]}", ""))
        else:
            out.append((str(flag), str(value)))
    return out


def vllm_other_nodes(engine_args: Mapping[str, Any] | None) -> str | None:
    """Multi-node `mp` (nnodes > 1): how the other nodes start (vLLM 0.32: the same engine
    arguments, each node its own --node-rank, and --headless: no API server there)."""
    nnodes = int((engine_args or {}).get("nnodes") or 1)
    if nnodes <= 1:
        return None
    headless = engine_keys().vllm_engine_args.serve_only_flags["headless"]
    return (
        f"this is node 0's line of {nnodes}: on node i (1 … {nnodes - 1}) run the same line with "
        f"--node-rank i {headless}"
    )


def vllm_command(
    target: str, conf: Mapping[str, Any] | None, engine_args: Mapping[str, Any] | None = None
) -> str:
    """The shell line that starts vLLM's OpenAI server with `conf` (None: without speculation),
    on the parallel layout of `engine_args` (the measured deployment's: `vllm_parallel_flags`)."""
    layout = "".join(
        f" {f} {shlex.quote(v)}" if v else f" {f}" for f, v in vllm_parallel_flags(engine_args)
    )
    if conf is None:
        return f"vllm serve {shlex.quote(target)}{layout}"
    text = json.dumps(dict(conf), ensure_ascii=False, separators=(", ", ": "))
    return f"vllm serve {shlex.quote(target)}{layout} --speculative-config {shlex.quote(text)}"


def one_gamma(ranges: Ranges, concurrency: int | None) -> int:
    """The one γ an engine without a batch-size schedule runs: the schedule's k when it is the
    same everywhere, else its k at the operating concurrency given."""
    ks = {int(k) for _, _, k in ranges}
    if concurrency is not None:
        return gamma_at(ranges, concurrency)
    if len(ks) != 1:
        switch = next(int(lo) for lo, _, k in ranges if int(k) != int(ranges[0][2]))
        raise SpecbenchError(
            f"the schedule changes k at batch size {switch} and this engine takes one γ per "
            "server: give --concurrency (the server's operating concurrency)"
        )
    return ks.pop()


def sglang_flags(
    dep: Deployment, gamma: int, layout: Sequence[tuple[str, str]] = ()
) -> list[tuple[str, str]]:
    """SGLang's flags for `dep` at γ on the measured `layout` (`parallel_layout.sglang_layout`;
    module docstring); one error line for a method SGLang has no chain drafter for."""
    algo = SGLANG_ALGORITHM.get(dep.method)
    if algo is None:
        raise SpecbenchError(
            f"method '{dep.method}' has no SGLang chain-drafter equivalent (mapped: "
            f"{', '.join(sorted(SGLANG_ALGORITHM))}): use --format vllm, trtllm or json"
        )
    if gamma <= 0:
        raise SpecbenchError("speculation is off at that concurrency: serve without speculation")
    flags = [("--model-path", dep.target), *layout, ("--speculative-algorithm", algo)]
    if dep.method in NEEDS_DRAFT:
        flags.append(("--speculative-draft-model-path", dep.draft or "DRAFT_MODEL"))
    flags += [
        ("--speculative-num-steps", str(gamma)),
        ("--speculative-eagle-topk", "1"),
        ("--speculative-num-draft-tokens", str(gamma + 1)),
    ]
    return flags


def sglang_command(dep: Deployment, gamma: int, layout: Sequence[tuple[str, str]] = ()) -> str:
    flags = sglang_flags(dep, gamma, layout)
    args = " ".join(f"{f} {shlex.quote(v)}" if v else f for f, v in flags)
    return f"python -m sglang.launch_server {args}"


def trtllm_options(
    ranges: Ranges, dep: Deployment | None = None, layout: Mapping[str, JsonValue] | None = None
) -> dict[str, JsonValue]:
    """`{…layout, "speculative_config": {decoding_type, max_draft_len, speculative_model, …,
    draft_len_schedule {hi: k, …}}}` (module docstring), the measured `layout`'s top-level keys
    first (`parallel_layout.trtllm_layout`); without `dep` only the draft lengths. A document
    (the `--extra_llm_api_options` YAML)."""
    _check(ranges)
    ks = [int(k) for _, _, k in ranges]
    if ks[0] != max(ks):
        raise SpecbenchError(
            f"TensorRT-LLM requires the draft length at batch 1 to be the largest (the smallest "
            f"draft_len_schedule key must map to max_draft_len); this schedule has k={ks[0]} at "
            f"batch 1 and k={max(ks)} above it: use --format vllm or json"
        )
    conf: dict[str, JsonValue] = {}
    if dep is not None:
        kind = TRTLLM_DECODING_TYPE.get(dep.method)
        if kind is None:
            raise SpecbenchError(
                f"method '{dep.method}' has no TensorRT-LLM decoding_type mapped (mapped: "
                f"{', '.join(sorted(TRTLLM_DECODING_TYPE))}): use --format vllm or json"
            )
        conf["decoding_type"] = kind
    conf["max_draft_len"] = ks[0]
    if dep is not None and dep.method in NEEDS_DRAFT:
        conf["speculative_model"] = dep.draft or "DRAFT_MODEL"
    if dep is not None and dep.method == "ngram":
        conf["max_matching_ngram_size"] = int(dep.options.get("prompt_lookup_max") or 2)
    if dep is not None and dep.method in ("eagle", "eagle3"):
        conf["eagle3_one_model"] = True  # the only implementation at the recorded commit
    # the last ranges that are off need no key: past the largest key the draft length is 0
    kept = list(ranges)
    while kept and int(kept[-1][2]) == 0:
        kept.pop()
    if len(ranges) > 1:
        # int keys, as TensorRT-LLM reads them (the YAML's keys; JSON would make them text)
        conf["draft_len_schedule"] = {int(hi): int(k) for _, hi, k in kept}  # type: ignore[misc]
    return {**(layout or {}), "speculative_config": conf}


def trtllm_command(target: str, options_file: str = "extra_llm_api_options.yaml") -> str:
    return f"trtllm-serve {shlex.quote(target)} --extra_llm_api_options {shlex.quote(options_file)}"


def unknown_keys(engine: str, keys: Sequence[str], decoding_type: str | None = None) -> list[str]:
    """The keys not in the engine's recorded config classes (engine-keys.json)."""
    rec = engine_keys()
    known = {
        "vllm": set(rec.vllm.keys),
        "sglang": rec.sglang.known(),
        "trtllm": rec.trtllm.known(decoding_type),
    }[engine]
    return [k for k in keys if k not in known]


def trtllm_draft_len(draft_len_schedule: Mapping[int, int], b: int) -> int:
    """TensorRT-LLM's lookup: the value of the smallest key ≥ b (past the last key: 0)."""
    for key in sorted(int(k) for k in draft_len_schedule):
        if b <= key:
            return int(draft_len_schedule[key])
    return 0


def neutral_document(
    schedule: GammaSchedule,
    workload: str,
    temperature: float | None,
    provenance: Mapping[str, JsonValue],
) -> dict[str, JsonValue]:
    """The schedule, each measured concurrency's decision and intervals, and where it came from."""
    return {
        "schema": NEUTRAL_SCHEMA,
        "workload": workload,
        "temperature": temperature,
        "schedule": [list(r) for r in schedule.ranges],
        "k_zero_means": "off (no speculation at that batch size)",
        "rule": schedule.rule,
        "family": schedule.family,
        "false_on_rate": schedule.false_on_rate,
        "margin": schedule.margin,
        "throughput": schedule.throughput,
        "measured": [row.model_dump(mode="json") for row in schedule.concurrencies],
        "boundaries": [b.model_dump(mode="json") for b in schedule.boundaries],
        "measured_up_to": schedule.measured_up_to,
        "extrapolated_from": schedule.extrapolated_from,
        "provenance": dict(provenance),
    }
