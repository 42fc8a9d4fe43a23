"""The Prometheus HTTP API as a canary source (docs/canary.md, "Prometheus").

Each quantity is one range query per arm, evaluated at the end of every window (step = the
window): `sum(increase(counter{arm}[w]))`, and for a histogram its _sum, _count and
`sum by (le) (increase(…_bucket{arm}[w]))`. `sum` aggregates across pods, and increase() handles
counter resets. The bearer token, if any, is read from the environment variable the config names.
"""

from __future__ import annotations

import math
import os
from typing import Any

import httpx2

from specbench.config.canary import MetricNames, PrometheusSource
from specbench.errors import SpecbenchError
from specbench.harness.canary.counters import Deltas, parse_selector

MAX_WINDOWS_PER_QUERY = 10_000  # Prometheus refuses more than 11,000 points per series


class PromClient:
    def __init__(self, src: PrometheusSource) -> None:
        headers = {}
        if src.token_env:
            token = os.environ.get(src.token_env)
            if not token:
                raise SpecbenchError(
                    f"sources.prometheus.token_env names {src.token_env}, which is not set"
                )
            headers["Authorization"] = f"Bearer {token}"
        self.base = src.url.rstrip("/")
        self.client = httpx2.Client(timeout=httpx2.Timeout(src.timeout_s), headers=headers)

    def range(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        try:
            resp = self.client.get(
                f"{self.base}/api/v1/query_range",
                params={"query": query, "start": start, "end": end, "step": step},
            )
        except httpx2.HTTPError as exc:
            raise SpecbenchError(
                f"cannot reach Prometheus at {self.base} ({type(exc).__name__}); check sources.prometheus.url"
            ) from None
        try:
            doc = resp.json()
        except ValueError:
            raise SpecbenchError(
                f"{self.base} did not answer with JSON (HTTP {resp.status_code})"
            ) from None
        if doc.get("status") != "success":
            raise SpecbenchError(
                f"Prometheus refused `{query}`: {doc.get('error', resp.status_code)}"
            )
        return list(doc["data"]["result"])

    def close(self) -> None:
        self.client.close()


def _series(result: list[dict[str, Any]]) -> dict[float, float]:
    """{evaluation time: value} of a one-series result (summed if several)."""
    out: dict[float, float] = {}
    for series in result:
        for t, v in series.get("values", []):
            x = float(v)
            if math.isfinite(x):
                out[float(t)] = out.get(float(t), 0.0) + x
    return out


def arm_deltas(
    pc: PromClient, names: MetricNames, matcher: str, ends: list[float], window_s: float
) -> dict[float, Deltas]:
    """Each window's deltas of one arm, keyed by the window's end time."""
    out = {t: Deltas() for t in ends}
    start, end = ends[0], ends[-1]
    w = f"{round(window_s)}s"
    counters = [names.requests, names.finish, names.accepted, names.proposed, names.drafts]
    for name in [n for n in [*counters, *(names.errors or [])] if n]:
        sel = parse_selector(name)
        q = f"sum(increase({sel.promql(matcher)}[{w}]))"
        for t, v in _series(pc.range(q, start, end, window_s)).items():
            if t in out:
                out[t].counters[name] = v
    for name in [n for n in (names.tpot, names.e2e, names.output_tokens) if n]:
        sel = parse_selector(name)
        parts = {}
        for suffix in ("_sum", "_count"):
            s = type(sel)(sel.name + suffix, sel.labels)
            parts[suffix] = _series(
                pc.range(f"sum(increase({s.promql(matcher)}[{w}]))", start, end, window_s)
            )
        b = type(sel)(sel.name + "_bucket", sel.labels)
        buckets = pc.range(
            f"sum by (le) (increase({b.promql(matcher)}[{w}]))", start, end, window_s
        )
        for t in ends:
            if t not in parts["_count"]:
                continue
            edges: dict[float, float] = {}
            for series in buckets:
                le = float(series["metric"].get("le", "inf"))
                for ts, v in series.get("values", []):
                    if float(ts) == t and math.isfinite(float(v)):
                        edges[le] = float(v)
            out[t].hist[name] = (parts["_sum"].get(t, 0.0), parts["_count"][t], edges)
    return out


def window_ends(first: int, last: int, window_s: float) -> list[list[float]]:
    """End times of epoch-aligned windows first … last (inclusive), in chunks one range query
    can return (Prometheus refuses more than 11,000 points per series)."""
    ends = [(k + 1) * window_s for k in range(first, last + 1)]
    return [ends[i : i + MAX_WINDOWS_PER_QUERY] for i in range(0, len(ends), MAX_WINDOWS_PER_QUERY)]
