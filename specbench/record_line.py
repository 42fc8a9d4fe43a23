"""One records.jsonl line as the analysis reads it: `RecordLine`, a TypedDict of every key a
known record kind may hold, with its type.

A line is read as the JSON object written (`records.read_records`), after its kind's pydantic
model (`records.BaselineRecord`, `SpecRecord`, `EngineMetricsRecord`, …) has checked it, so these
types hold; the dict itself is kept, not the model, because the analysis passes whole lines along
(grouping, restricting to prompts) and results.json echoes some of them key for key. Every key is
optional here (total=False): which ones a line has depends on its kind and backend, and the models
say which are required. The nested engine payloads (`spec_counters`, `response_spec`,
`reconciliation`, `request`, `content`) are the engines' own JSON, read by
`analysis.serving.spec_counters` and friends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict


class RecordLine(TypedDict, total=False):
    # every kind (`records.Record`)
    schema: int
    kind: str
    # a unit: measured, failed or warm-up (`records.UnitRecord`)
    unit_kind: str
    workload: str
    temperature: float
    gamma: int
    prompt_id: str
    drafter: str
    policy: str
    repeat: int
    status: str
    seed: int | None
    plan_step: str | None
    plan_prompts: int | None
    target_forwards: int | None
    top_p: float | None
    top_k: int | None
    concurrency: int
    backend: str | None
    endpoint: str | None
    load: str | None
    rate: float | None
    attempt: str | None
    method: str | None
    setting: str | None
    # a measured prompt (`records.MeasuredRecord`)
    turns: int | None
    new_tokens: float  # an int in a run's records; simulated records carry expected counts
    new_tokens_per_turn: list[int]
    stop_reason: list[str | None]
    wall_ms: float
    decode_ms: float
    tokens_per_s: float
    tpot_ms: float | None
    peak_memory_mb: float | None
    ttft_ms: list[float]
    e2e_ms: list[float]
    step_ms: list[float]
    forward_ms: list[float]
    draft_prefill_ms: list[float]
    rounds: dict[str, Any]  # `records.Rounds`: per-round lists, by field
    spec_counters: dict[str, Any] | None
    counters_polluted: bool | None
    response_spec: dict[str, Any] | None
    answers: list[str]
    answer_digest: str
    output_ids: list[list[int]]
    content: list[dict[str, Any]]
    sampling: str | None
    request: dict[str, Any] | None
    chunks: list[int]
    stream_span_ms: list[float | None]
    buffered: bool | None
    arrival_s: float
    queue_ms: float | None
    draw: int | None
    phase: str | None
    done_s: float | None
    # a failed unit
    error: str | None
    # an engine batch (`records.EngineMetricsRecord`)
    metrics_available: bool
    acceptance_available: bool
    n_requests: int
    n_planned: int
    n_failed: int
    output_tokens: int
    batch_wall_ms: float
    offered_rate: float | None
    accept_length_gauge: float | None
    reconciliation: dict[str, Any] | None
    output_tokens_per_s: float | None
    partial: bool
    not_sent: int | None
    hit_bound: bool | None
    steady_window_s: list[float]  # [warm-up end, end]
    # an engine setting's γ schedule and its engine start (engine.interleave)
    schedule: list[list[int]] | None
    engine_start: int | None
    # the profile's mix (`analysis.serving.mix_batches`): on its requests and its batch's line
    mix: str | None
    mix_shares: dict[str, dict[str, float]] | None
    # batch timing (`records.BatchTimingRecord`)
    batch_size: int
    context_len: int
    draft_ms: float
    gammas: list[int]
    verify_ms: list[float]


@dataclass(frozen=True)
class UnitFinished:
    """A unit's line just written, as the run's progress hears of it (`harness.plan.RunEvents`
    → `report.run.progress`): the core never prints, so it hands over what the display names."""

    workload: str | None
    gamma: int | None
    prompt_id: str | None
    failed: bool  # the line's status is "failed"
    error: str | None

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> UnitFinished:
        """The event of a line as the harness writes it (any kind; a key it lacks is None)."""
        return cls(
            record.get("workload"),
            record.get("gamma"),
            record.get("prompt_id"),
            record.get("status") == "failed",
            record.get("error"),
        )
