"""A serving engine's speculative-decoding counters as numbers: diff them, convert them into
specbench's acceptance estimators (docs/theory.md §2, §3, §6). Pure arithmetic: reading them from
an engine (Prometheus text, `vllm.LLM.get_metrics()`) is `harness.serving.metrics.metrics`.

The counters (vLLM's names, `vllm:spec_decode_*`): drafts (rounds), draft tokens (proposed),
accepted tokens, and per position i the drafts whose first i+1 tokens were all accepted. They
are cumulative: a workload's figures are `after.minus(before)`.

Conversion to specbench's estimators, for drafts of γ tokens (docs/theory.md §2):
    τ = 1 + accepted / drafts                       mean acceptance length (bonus token included)
    accepted / proposed = accepted / draft_tokens   vLLM's "acceptance rate", biased low
    accepted / tested, tested = accepted + drafts − per_pos[γ−1]   (the iid MLE of α)
    a_i = per_pos[i−1] / per_pos[i−2], per_pos[−1] := drafts      per-position conditional
    #rounds accepting exactly k = per_pos[k−1] − per_pos[k]        the accepted histogram
    ā(γ') = 1 + Σ_{i<γ'} per_pos[i] / drafts                        the truncation curve (§3)
(When a drafter proposes fewer than γ tokens, e.g. n-gram lookup without a match, draft_tokens <
drafts·γ and the per-position figures past the shortest draft are biased low.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specbench.analysis.arithmetic import roi
from specbench.analysis.documents.results_model_engine import SpecCountersJSON


@dataclass(frozen=True)
class SpecCounters:
    """Cumulative (or diffed) spec-decode counters of one engine."""

    drafts: float
    draft_tokens: float
    accepted: float
    per_pos: tuple[float, ...] = ()  # per_pos[i]: drafts with the first i+1 tokens accepted
    source: str = "vllm"

    def minus(self, before: SpecCounters) -> SpecCounters:
        """The counts between two snapshots (self = after)."""
        n = max(len(self.per_pos), len(before.per_pos))
        a = list(self.per_pos) + [0.0] * (n - len(self.per_pos))
        b = list(before.per_pos) + [0.0] * (n - len(before.per_pos))
        return SpecCounters(
            self.drafts - before.drafts,
            self.draft_tokens - before.draft_tokens,
            self.accepted - before.accepted,
            tuple(x - y for x, y in zip(a, b, strict=True)) if self.per_pos else (),
            self.source,
        )

    def plus(self, other: SpecCounters) -> SpecCounters:
        n = max(len(self.per_pos), len(other.per_pos))
        a = list(self.per_pos) + [0.0] * (n - len(self.per_pos))
        b = list(other.per_pos) + [0.0] * (n - len(other.per_pos))
        return SpecCounters(
            self.drafts + other.drafts,
            self.draft_tokens + other.draft_tokens,
            self.accepted + other.accepted,
            tuple(x + y for x, y in zip(a, b, strict=True)),
            self.source,
        )

    def to_dict(self) -> dict[str, float | str | list[float]]:
        """The counters as a record stores them (records.jsonl `spec_counters`, `response_spec`)."""
        return {
            "num_drafts": self.drafts,
            "num_draft_tokens": self.draft_tokens,
            "num_accepted_tokens": self.accepted,
            "num_accepted_tokens_per_pos": list(self.per_pos),
            "source": self.source,
        }

    def to_json(self) -> SpecCountersJSON:
        """The counters as results.json holds them (`engine.per_gamma[γ].counters`)."""
        return SpecCountersJSON(
            num_drafts=self.drafts,
            num_draft_tokens=self.draft_tokens,
            num_accepted_tokens=self.accepted,
            num_accepted_tokens_per_pos=list(self.per_pos),
            source=self.source,
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SpecCounters:
        return cls(
            float(d["num_drafts"]),
            float(d["num_draft_tokens"]),
            float(d["num_accepted_tokens"]),
            tuple(float(x) for x in d.get("num_accepted_tokens_per_pos") or ()),
            str(d.get("source", "vllm")),
        )


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


@dataclass(frozen=True)
class CounterEstimates:
    """specbench's acceptance estimators from one set of counters at γ."""

    gamma: int
    rounds: float
    mean_accepted_length: float | None  # τ
    accepted_proposed: float | None
    accepted_tested: float | None
    alpha_from_length: float | None  # α solved from τ under the iid model
    per_position: list[float | None] = field(default_factory=list)  # conditional a_i
    per_position_rate: list[float | None] = field(default_factory=list)  # per_pos_i / drafts
    histogram: list[int] = field(default_factory=list)
    truncation: dict[int, float] = field(default_factory=dict)


def per_position_conditional(drafts: float, per_pos: tuple[float, ...]) -> list[float | None]:
    """a_i = per_pos[i−1] / per_pos[i−2] with per_pos[−1] = drafts (docs/theory.md §2 (d))."""
    prev = drafts
    out: list[float | None] = []
    for v in per_pos:
        out.append(_ratio(v, prev))
        prev = v
    return out


def estimates(c: SpecCounters, gamma: int) -> CounterEstimates:
    """Convert counters measured at γ into specbench's estimators."""
    per = tuple(c.per_pos[:gamma])
    tau = 1.0 + c.accepted / c.drafts if c.drafts > 0 else None
    tested = c.accepted + c.drafts - per[gamma - 1] if len(per) >= gamma else None
    alpha_len = (
        roi.alpha_from_accepted(min(max(tau, 1.0), gamma + 1.0), gamma) if tau is not None else None
    )
    hist: list[int] = []
    trunc: dict[int, float] = {}
    if per and len(per) == gamma and c.drafts > 0:
        bounds = (c.drafts, *per, 0.0)
        hist = [round(bounds[k] - bounds[k + 1]) for k in range(gamma + 1)]
        for g in range(1, gamma + 1):
            trunc[g] = 1.0 + sum(per[:g]) / c.drafts
    return CounterEstimates(
        gamma=gamma,
        rounds=c.drafts,
        mean_accepted_length=tau,
        accepted_proposed=_ratio(c.accepted, c.draft_tokens),
        accepted_tested=_ratio(c.accepted, tested) if tested is not None else None,
        alpha_from_length=alpha_len,
        per_position=per_position_conditional(c.drafts, per),
        per_position_rate=[_ratio(v, c.drafts) for v in per],
        histogram=hist,
        truncation=trunc,
    )
