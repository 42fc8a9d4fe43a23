"""Speculative-decoding counters reported by serving engines: parse, diff, convert (docs/theory.md §6).

Where they come from:
- Prometheus text from a server's `/metrics`. vLLM V1 (counters, exported with `_total`):
  `vllm:spec_decode_num_drafts`, `vllm:spec_decode_num_draft_tokens`,
  `vllm:spec_decode_num_accepted_tokens`, `vllm:spec_decode_num_accepted_tokens_per_pos{position="i"}`
  (drafts whose first i+1 tokens were all accepted). vLLM V0 had no drafts counter but
  `vllm:spec_decode_num_emitted_tokens` (accepted + one bonus/correction per round, so
  drafts = emitted − accepted) and no per-position counter. SGLang exports a gauge of the mean
  accept length (`sglang:spec_accept_length`), which cannot be diffed: it is kept as reported.
- In-process `vllm.LLM.get_metrics()`: `Counter(name, labels, value)` and, for the per-position
  counter, `Vector(name, labels, values)`, with the same names (no `_total`).
Label sets (several engines, data parallel) are summed. Counters are cumulative: a workload's
figures are `after.minus(before)`.

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

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specbench.analysis import roi

VLLM_PREFIX = "vllm:spec_decode_"
_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Samples = dict[str, list[tuple[dict[str, str], float]]]


# ---------------------------------------------------------------------------------------------
# parsing


def parse_prometheus(text: str) -> Samples:
    """Prometheus text exposition → {sample name: [(labels, value), ...]} (comments skipped)."""
    out: Samples = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            value = float(m["value"])
        except ValueError:
            continue
        labels = dict(_LABEL.findall(m["labels"] or ""))
        out.setdefault(m["name"], []).append((labels, value))
    return out


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_drafts": self.drafts,
            "num_draft_tokens": self.draft_tokens,
            "num_accepted_tokens": self.accepted,
            "num_accepted_tokens_per_pos": list(self.per_pos),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SpecCounters:
        return cls(
            float(d["num_drafts"]),
            float(d["num_draft_tokens"]),
            float(d["num_accepted_tokens"]),
            tuple(float(x) for x in d.get("num_accepted_tokens_per_pos") or ()),
            str(d.get("source", "vllm")),
        )


def _total(samples: Samples, base: str) -> float | None:
    """Sum over label sets of `base_total` (or `base`, older exporters)."""
    for name in (f"{base}_total", base):
        if name in samples:
            return sum(v for _, v in samples[name])
    return None


def spec_counters_from_samples(samples: Samples) -> SpecCounters | None:
    """vLLM's spec-decode counters from parsed /metrics; None when the server exports none."""
    accepted = _total(samples, VLLM_PREFIX + "num_accepted_tokens")
    draft_tokens = _total(samples, VLLM_PREFIX + "num_draft_tokens")
    if accepted is None or draft_tokens is None:
        return None
    drafts = _total(samples, VLLM_PREFIX + "num_drafts")
    source = "vllm"
    if drafts is None:
        emitted = _total(samples, VLLM_PREFIX + "num_emitted_tokens")
        if emitted is None:
            return None
        drafts, source = emitted - accepted, "vllm_v0"
    per: dict[int, float] = {}
    for name in (VLLM_PREFIX + "num_accepted_tokens_per_pos_total",):
        for labels, value in samples.get(name, []):
            if "position" in labels:
                pos = int(labels["position"])
                per[pos] = per.get(pos, 0.0) + value
    per_pos = tuple(per.get(i, 0.0) for i in range(max(per) + 1)) if per else ()
    return SpecCounters(drafts, draft_tokens, accepted, per_pos, source)


def accept_length_gauge(samples: Samples) -> float | None:
    """SGLang's mean accept length gauge (τ, bonus token included), where exported."""
    for name, rows in samples.items():
        if name.startswith("sglang:") and "accept_len" in name and rows:
            return sum(v for _, v in rows) / len(rows)
    return None


def spec_counters_from_vllm_metrics(metrics: Iterable[Any]) -> SpecCounters | None:
    """The same counters from `vllm.LLM.get_metrics()` (objects with `.name` and `.value` or
    `.values`); None when the engine runs without speculation."""
    sums: dict[str, float] = {}
    per: list[float] = []
    for m in metrics:
        name = getattr(m, "name", "")
        if not name.startswith(VLLM_PREFIX):
            continue
        key = name.removeprefix(VLLM_PREFIX).removesuffix("_total")
        if key == "num_accepted_tokens_per_pos":
            values = list(getattr(m, "values", []) or [])
            per += [0.0] * (len(values) - len(per))
            for i, v in enumerate(values):
                per[i] += float(v)
        elif hasattr(m, "value"):
            sums[key] = sums.get(key, 0.0) + float(m.value)
    if not {"num_drafts", "num_draft_tokens", "num_accepted_tokens"} <= set(sums):
        return None
    return SpecCounters(
        sums["num_drafts"],
        sums["num_draft_tokens"],
        sums["num_accepted_tokens"],
        tuple(per),
        "vllm",
    )


# ---------------------------------------------------------------------------------------------
# conversion to specbench's estimators


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


def is_finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
