"""Read a serving engine's speculative-decoding counters (the arithmetic on them:
`analysis.serving.spec_counters`, docs/theory.md §6).

Where they come from:
- Prometheus text from a server's `/metrics`, parsed by `prometheus_client`'s own parser (label
  values unescaped, timestamps and exemplars understood). vLLM V1 (counters, exported with
  `_total`): `vllm:spec_decode_num_drafts`, `vllm:spec_decode_num_draft_tokens`,
  `vllm:spec_decode_num_accepted_tokens`, `vllm:spec_decode_num_accepted_tokens_per_pos{position="i"}`
  (drafts whose first i+1 tokens were all accepted). vLLM V0 had no drafts counter but
  `vllm:spec_decode_num_emitted_tokens` (accepted + one bonus/correction per round, so
  drafts = emitted − accepted) and no per-position counter. SGLang exports a gauge of the mean
  accept length (`sglang:spec_accept_length`), which cannot be diffed: it is kept as reported.
- In-process `vllm.LLM.get_metrics()`: `Counter(name, labels, value)` and, for the per-position
  counter, `Vector(name, labels, values)`, with the same names (no `_total`).
Label sets (several engines, data parallel) are summed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from specbench.analysis.serving.spec_counters import SpecCounters

VLLM_PREFIX = "vllm:spec_decode_"

# {sample name: [(labels, value), ...]}: one scrape of a /metrics endpoint
MetricSamples = dict[str, list[tuple[dict[str, str], float]]]


def parse_prometheus(text: str) -> MetricSamples:
    """Prometheus text exposition → {sample name: [(labels, value), ...]} (comments skipped).

    A malformed line does not lose the rest of the scrape: the text is then parsed line by line
    and the lines the parser refuses are skipped (the counters we read are on well-formed lines).
    """
    out: MetricSamples = {}
    try:
        _collect(text, out)
    except ValueError:
        out.clear()
        for line in text.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                try:
                    _collect(line, out)
                except ValueError:
                    continue
    return out


def _collect(text: str, out: MetricSamples) -> None:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))


def _total(samples: MetricSamples, base: str) -> float | None:
    """Sum over label sets of `base_total` (or `base`, older exporters)."""
    for name in (f"{base}_total", base):
        if name in samples:
            return sum(v for _, v in samples[name])
    return None


def spec_counters_from_samples(samples: MetricSamples) -> SpecCounters | None:
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
    for labels, value in samples.get(VLLM_PREFIX + "num_accepted_tokens_per_pos_total", []):
        if "position" in labels:
            pos = int(labels["position"])
            per[pos] = per.get(pos, 0.0) + value
    per_pos = tuple(per.get(i, 0.0) for i in range(max(per) + 1)) if per else ()
    return SpecCounters(drafts, draft_tokens, accepted, per_pos, source)


def accept_length_gauge(samples: MetricSamples) -> float | None:
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
