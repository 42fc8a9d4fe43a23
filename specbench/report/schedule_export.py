"""The γ schedule written in each engine's own configuration (`specbench schedule`, docs/schedule.md).

- vLLM: the `speculative_config` JSON (what `vllm serve --speculative-config` and
  `LLM(speculative_config=…)` take) with `num_speculative_tokens_per_batch_size: [[lo, hi, k], …]`
  (inclusive ranges from 1; k = 0 allowed; vLLM clamps each k to `num_speculative_tokens`, so that
  is set to the largest k, and clamps hi to its `max_num_seqs`).
- TensorRT-LLM: `speculative_config.draft_len_schedule {batch: k}` for `--extra_llm_api_options`
  (YAML). Each key is the upper end of a range: a batch of size b uses the value of the smallest key
  ≥ b (`trtllm_draft_len`). TensorRT-LLM requires key 1 and `draft_len_schedule[1] ==
  max_draft_len`, so a schedule whose k at batch 1 is not its largest cannot be written.
- neutral JSON: the ranges, each measured concurrency's decision with its intervals, the boundary
  rules and the run's provenance.

"Off" (k = 0) inside a speculative engine still loads the draft and may pay some of its overhead;
the run measured "off" as an engine without speculation (docs/theory.md §11).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specbench.analysis.results_model_engine import GammaSchedule
from specbench.errors import SpecbenchError

Ranges = Sequence[Sequence[int]]
NEUTRAL_SCHEMA = 1


def _check(ranges: Ranges) -> None:
    if not ranges or not any(int(k) > 0 for _, _, k in ranges):
        raise SpecbenchError(
            "the schedule is off at every measured concurrency: serve without speculation "
            "(--format json writes the decisions)"
        )


def vllm_speculative_config(ranges: Ranges, base: Mapping[str, Any] | None) -> dict[str, Any]:
    """`base` (the run's speculative_config: method, model, options) with the schedule."""
    _check(ranges)
    conf = {k: v for k, v in (base or {}).items() if k != "num_speculative_tokens_per_batch_size"}
    conf["num_speculative_tokens"] = max(int(k) for _, _, k in ranges)
    conf["num_speculative_tokens_per_batch_size"] = [[int(x) for x in r] for r in ranges]
    return conf


def trtllm_options(ranges: Ranges) -> dict[str, Any]:
    """`{"speculative_config": {"max_draft_len": k(1), "draft_len_schedule": {hi: k, …}}}`."""
    _check(ranges)
    ks = [int(k) for _, _, k in ranges]
    if ks[0] != max(ks):
        raise SpecbenchError(
            f"TensorRT-LLM requires the draft length at batch 1 to be the largest "
            f"(draft_len_schedule[1] == max_draft_len); this schedule has k={ks[0]} at batch 1 "
            f"and k={max(ks)} above it: use --format vllm or json"
        )
    schedule = {1: ks[0]}
    for _, hi, k in ranges:
        schedule[int(hi)] = int(k)
    return {"speculative_config": {"max_draft_len": ks[0], "draft_len_schedule": schedule}}


def trtllm_draft_len(draft_len_schedule: Mapping[int, int], b: int) -> int:
    """TensorRT-LLM's lookup: the value of the smallest key ≥ b (past the last key: 0)."""
    for key in sorted(int(k) for k in draft_len_schedule):
        if b <= key:
            return int(draft_len_schedule[key])
    return 0


def neutral_document(
    schedule: GammaSchedule, workload: str, temperature: float, provenance: Mapping[str, Any]
) -> dict[str, Any]:
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
        "goodput": schedule.goodput,
        "measured": [row.model_dump(mode="json") for row in schedule.concurrencies],
        "boundaries": [b.model_dump(mode="json") for b in schedule.boundaries],
        "measured_up_to": schedule.measured_up_to,
        "extrapolated_from": schedule.extrapolated_from,
        "provenance": dict(provenance),
    }
