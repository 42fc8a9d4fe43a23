"""Per-request speculative-decoding acceptance from the engine's own response (`backend: openai`).

Where an engine reports it, a request's acceptance comes with the request, so it needs no
counter deltas and is attributed to its prompt at any concurrency (the prompts are then the
bootstrap units of the acceptance intervals, docs/theory.md §7).

What is read (anything else is ignored; a malformed object is ignored, not a failed request):

- **vLLM** started with `--per-request-spec-decode-metrics summary` (or `detailed`): a `metrics`
  object on the completion response; when streaming, on the final usage chunk (specbench always
  sends `stream_options: {include_usage: true}`). `metrics.speculative_decoding` =
  {num_spec_steps, num_draft_tokens, num_accepted_draft_tokens, num_spec_tokens,
  acceptance_histogram (index j: verify steps that accepted exactly j draft tokens), …}.
- **SGLang**: `meta_info` on a choice or on the response, with `spec_verify_ct` (verify steps)
  and, where the version reports them, `spec_accept_token_num` / `spec_draft_token_num`; without
  the accepted count it is derived as completion_tokens − spec_verify_ct (each verify step emits
  its accepted tokens plus one), and without the draft count as spec_verify_ct × γ.

Both become a `SpecCounters` with the counters' meaning (drafts = verify steps with a draft,
per_pos[i] = steps whose first i+1 draft tokens were accepted = Σ_{j>i} histogram[j]), so the
estimators of `analysis.serving.spec_counters` apply unchanged.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specbench.analysis.serving.spec_counters import SpecCounters

VLLM_SOURCE = "vllm_response"
SGLANG_SOURCE = "sglang_response"


class VllmSpecMetrics(BaseModel):
    """vLLM's `SpeculativeDecodingMetrics` (vllm/entrypoints/generate/base/protocol.py)."""

    model_config = ConfigDict(extra="ignore")

    num_spec_steps: int = Field(ge=0)
    num_draft_tokens: int = Field(ge=0)
    num_accepted_draft_tokens: int = Field(ge=0)
    num_spec_tokens: int = Field(default=0, ge=0)
    acceptance_histogram: list[int] = Field(default_factory=list)
    mean_acceptance_length: float | None = None
    draft_acceptance_rate: float | None = None
    per_step_accepted: list[int] | None = None
    per_step_drafted: list[int] | None = None


class _VllmMetrics(BaseModel):
    model_config = ConfigDict(extra="ignore")
    speculative_decoding: VllmSpecMetrics | None = None


class SglangMetaInfo(BaseModel):
    """The spec-decode fields of SGLang's `meta_info`."""

    model_config = ConfigDict(extra="ignore")

    spec_verify_ct: int | None = Field(default=None, ge=0)
    spec_accept_token_num: int | None = Field(default=None, ge=0)
    spec_draft_token_num: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)


def per_pos_from_histogram(histogram: list[int]) -> tuple[float, ...]:
    """per_pos[i] = Σ_{j>i} histogram[j]: steps whose first i+1 draft tokens were accepted
    (acceptance stops at the first rejection, so accepting j tokens means the first j)."""
    return tuple(float(sum(histogram[i + 1 :])) for i in range(max(len(histogram) - 1, 0)))


def from_vllm(m: VllmSpecMetrics) -> SpecCounters:
    return SpecCounters(
        float(m.num_spec_steps),
        float(m.num_draft_tokens),
        float(m.num_accepted_draft_tokens),
        per_pos_from_histogram(m.acceptance_histogram),
        VLLM_SOURCE,
    )


def from_sglang(
    m: SglangMetaInfo, completion_tokens: int | None, gamma: int
) -> SpecCounters | None:
    steps = m.spec_verify_ct
    if not steps:
        return None
    accepted = m.spec_accept_token_num
    if accepted is None:
        n = m.completion_tokens if m.completion_tokens is not None else completion_tokens
        if n is None:
            return None
        accepted = max(n - steps, 0)
    drafted = m.spec_draft_token_num if m.spec_draft_token_num is not None else steps * gamma
    return SpecCounters(float(steps), float(drafted), float(accepted), (), SGLANG_SOURCE)


def response_spec(
    chunk: dict[str, Any], completion_tokens: int | None, gamma: int
) -> SpecCounters | None:
    """The request's acceptance from one response (or stream chunk) object, or None when it
    carries none."""
    metrics = chunk.get("metrics")
    if isinstance(metrics, dict):
        try:
            parsed = _VllmMetrics.model_validate(metrics).speculative_decoding
        except ValidationError:
            parsed = None
        if parsed is not None:
            return from_vllm(parsed)
    metas = [chunk.get("meta_info")] + [
        c.get("meta_info") for c in chunk.get("choices") or [] if isinstance(c, dict)
    ]
    for meta in metas:
        if isinstance(meta, dict) and "spec_verify_ct" in meta:
            try:
                info = SglangMetaInfo.model_validate(meta)
            except ValidationError:
                continue
            got = from_sglang(info, completion_tokens, gamma)
            if got is not None:
                return got
    return None


def summed(parts: list[SpecCounters | None]) -> SpecCounters | None:
    """A conversation's acceptance: its turns' summed, or None unless every turn reported one."""
    if not parts or any(p is None for p in parts):
        return None
    total = parts[0]
    assert total is not None
    for p in parts[1:]:
        assert p is not None
        total = total.plus(p)
    return total
