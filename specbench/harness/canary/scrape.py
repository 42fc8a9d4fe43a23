"""A direct `/metrics` scrape of each server, for small set-ups without a Prometheus server
(docs/canary.md, "Metrics"). Every look scrapes every URL of both arms once and appends the
cumulative values to `<state>.scrapes.jsonl`; the window is what grew since the previous
snapshot, per server, summed over servers. A counter that went down was reset (the server
restarted): it counts from zero, as Prometheus's increase() does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx2

from specbench.config.canary import MetricNames
from specbench.errors import SpecbenchError
from specbench.harness.canary.counters import Deltas, Selector, parse_selector
from specbench.harness.serving.metrics.metrics import MetricSamples, parse_prometheus

MAX_METRICS_BYTES = 64 * 1024 * 1024

# cumulative values of one server: {"c": {selector: value}, "h": {name: [sum, count, {le: n}]}}
Totals = dict[str, Any]


def _counters(names: MetricNames) -> list[str]:
    out = [names.requests, names.finish, names.accepted, names.proposed, names.drafts]
    return [n for n in [*out, *(names.errors or [])] if n]


def _histograms(names: MetricNames) -> list[str]:
    return [n for n in (names.tpot, names.e2e, names.output_tokens) if n]


def _sum(samples: MetricSamples, sel: Selector, suffixes: Iterable[str]) -> float | None:
    for s in suffixes:
        rows = samples.get(sel.name + s)
        if rows is not None:
            return sum(v for labels, v in rows if sel.matches(labels))
    return None


def totals_from_text(text: str, names: MetricNames) -> Totals:
    """One server's cumulative counters and histograms from its /metrics text."""
    samples = parse_prometheus(text)
    c: dict[str, float] = {}
    for name in _counters(names):
        sel = parse_selector(name)
        v = _sum(samples, sel, ("", "_total") if not sel.name.endswith("_total") else ("",))
        if v is not None:
            c[name] = v
    h: dict[str, list[Any]] = {}
    for name in _histograms(names):
        sel = parse_selector(name)
        total, count = _sum(samples, sel, ("_sum",)), _sum(samples, sel, ("_count",))
        if total is None or count is None:
            continue
        buckets: dict[str, float] = {}
        for labels, v in samples.get(sel.name + "_bucket", []):
            if sel.matches(labels) and "le" in labels:
                buckets[labels["le"]] = buckets.get(labels["le"], 0.0) + v
        h[name] = [total, count, buckets]
    return {"c": c, "h": h}


def scrape(client: httpx2.Client, url: str, names: MetricNames) -> Totals:
    try:
        resp = client.get(url)
    except httpx2.HTTPError as exc:
        raise SpecbenchError(
            f"cannot scrape {url} ({type(exc).__name__}); is the server up?"
        ) from None
    if resp.status_code != 200:
        raise SpecbenchError(f"{url} answered HTTP {resp.status_code}; give its /metrics URL")
    if len(resp.content) > MAX_METRICS_BYTES:
        raise SpecbenchError(f"{url} returned more than {MAX_METRICS_BYTES} bytes of metrics")
    return totals_from_text(resp.text, names)


def _grow(now: float, before: float | None) -> float:
    """What a counter grew by; a counter that went down was reset and counts from zero."""
    if before is None:
        return now
    return now - before if now >= before else now


def deltas(now: dict[str, Totals], before: dict[str, Totals]) -> Deltas:
    """Per server growth, summed over servers (a server first seen counts from its snapshot on)."""
    d = Deltas()
    for url, t in now.items():
        prev = before.get(url)
        if prev is None:
            continue
        for k, v in t["c"].items():
            d.counters[k] = d.counters.get(k, 0.0) + _grow(v, prev["c"].get(k))
        for k, (s, n, b) in t["h"].items():
            p = prev["h"].get(k)
            reset = p is not None and n < p[1]
            ps, pn, pb = (0.0, 0.0, {}) if p is None or reset else p
            old = d.hist.get(k, (0.0, 0.0, {}))
            merged = dict(old[2])
            for le, v in b.items():
                edge = float(le)
                merged[edge] = merged.get(edge, 0.0) + v - pb.get(le, 0.0)
            d.hist[k] = (old[0] + s - ps, old[1] + n - pn, merged)
    return d


def snapshot(
    client: httpx2.Client, urls: dict[str, list[str]], names: MetricNames
) -> dict[str, Any]:
    """{"t": now, arm: {url: totals}} for both arms."""
    t = time.time()
    return {"t": t} | {arm: {u: scrape(client, u, names) for u in us} for arm, us in urls.items()}


def read_snapshots(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                raise SpecbenchError(f"{path} line {i} is not JSON; remove that line") from None
    return out


def append_snapshot(path: Path, snap: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(snap) + "\n")
