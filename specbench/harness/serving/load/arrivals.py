"""When an open-loop batch sends each request (`load:` in the config, docs/serving.md "Load").

A *load point* is how a batch's requests arrive: `closed` (the run's `concurrency` list, a closed
loop: a finished conversation is replaced at once), `rate=R` (Poisson arrivals at R requests per
second: independent exponential inter-arrival times of mean 1/R, seeded per workload ×
temperature × rate × repeat, so every engine setting sees the same arrival times), or `trace`
(the timestamps of a logged trace, relative to its first request, divided by `trace_speed`).
With `load.duration_s` / `load.requests` each closed-loop level c also gets `steady c=C`: c
clients drawing prompts with replacement until the end (not capped at the workload's prompts).
Arrivals are offsets in seconds from the batch's start; the first request is sent at 0.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specbench.config import RunConfig
from specbench.config.load import MAX_STEADY_REQUESTS, MAX_TRACE_ROWS, WARMUP_SHARE
from specbench.errors import SpecbenchError
from specbench.harness.plan.plan import unit_seed

CLOSED = "closed"
TRACE = "trace"
STEADY_CLOSED = "steady c="


@dataclass(frozen=True)
class LoadPoint:
    """One open-loop load point: a Poisson rate, or the trace (rate None)."""

    name: str  # "rate=2", "trace" or "steady c=4": the records' `load`
    rate: float | None
    concurrency: int | None = None  # a steady closed loop: this many clients


def rate_name(rate: float) -> str:
    return f"rate={rate:g}"


def open_points(cfg: RunConfig) -> list[LoadPoint]:
    points = [LoadPoint(rate_name(r), r) for r in cfg.load.rates]
    if cfg.load.trace is not None:
        points.append(LoadPoint(TRACE, None))
    if cfg.load.steady:
        points += [LoadPoint(f"{STEADY_CLOSED}{c}", None, c) for c in cfg.concurrency]
    return points


def poisson_arrivals(n: int, rate: float, seed: int) -> list[float]:
    """n arrival offsets (s) of a Poisson process of `rate` per second, the first at 0: the
    n − 1 gaps are iid exponential with mean 1 / rate."""
    if n <= 0:
        return []
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, n - 1)
    return [0.0, *np.cumsum(gaps).tolist()]


def arrival_seed(seed: int, workload: str, temp: float, point: LoadPoint, repeat: int) -> int:
    return unit_seed(seed, "arrivals", workload, temp, point.name, repeat)


def _offset(row: dict[str, object], where: str) -> float:
    if "arrival_s" in row:
        value = row["arrival_s"]
    elif "timestamp" in row:
        value = row["timestamp"]
        if isinstance(value, str):
            try:
                when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise SpecbenchError(
                    f"{where}: timestamp {value[:40]!r} is neither epoch seconds nor ISO 8601"
                ) from None
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.UTC)
            return when.timestamp()
    else:
        raise SpecbenchError(f"{where}: a trace row needs `arrival_s` or `timestamp`")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecbenchError(f"{where}: the arrival time must be a finite number, got {value!r}")
    return float(value)


def read_trace(path: str, base_dir: Path | None, speed: float = 1.0) -> list[float]:
    """The trace's arrival offsets (s, sorted, the first at 0) divided by `speed`; one clear
    error for a missing file, a malformed row or more than MAX_TRACE_ROWS rows."""
    p = Path(path).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    if not p.is_file():
        raise SpecbenchError(f"load.trace: file not found: {p}")
    times: list[float] = []
    with p.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            if len(times) >= MAX_TRACE_ROWS:
                raise SpecbenchError(f"load.trace: {p} has more than {MAX_TRACE_ROWS} rows")
            where = f"load.trace {p.name} line {lineno}"
            try:
                row = json.loads(line)
            except ValueError:
                raise SpecbenchError(f"{where}: not a JSON object") from None
            if not isinstance(row, dict):
                raise SpecbenchError(f"{where}: not a JSON object")
            times.append(_offset(row, where))
    if not times:
        raise SpecbenchError(f"load.trace: {p} holds no requests")
    times.sort()
    return [(t - times[0]) / speed for t in times]


def batch_arrivals(
    cfg: RunConfig,
    point: LoadPoint,
    n: int,
    workload: str,
    temp: float,
    repeat: int,
    trace: list[float] | None,
) -> list[float]:
    """The arrival offsets of one open-loop batch of `n` requests (a trace shorter than the
    workload sends only its own number of requests)."""
    if point.rate is not None:
        return poisson_arrivals(
            n, point.rate, arrival_seed(cfg.seed, workload, temp, point, repeat)
        )
    return list((trace or [])[:n])


@dataclass(frozen=True)
class SteadyWindow:
    """A steady-state batch's measurement window (s from its start, docs/serving.md "Steady
    state"): arrivals before `start` are warm-up; `end` is where arrivals stop (`load.duration_s`,
    or the last arrival when `load.requests` ended them first)."""

    start: float
    end: float


def steady_arrivals(
    cfg: RunConfig,
    point: LoadPoint,
    workload: str,
    temp: float,
    repeat: int,
    trace: list[float] | None,
) -> list[float]:
    """The arrivals of a steady-state batch: Poisson at the point's rate (or the trace's times)
    until `load.duration_s` and/or `load.requests`, whichever ends first (at most
    MAX_STEADY_REQUESTS). Seeded as `batch_arrivals`, so every setting sees the same ones."""
    end = cfg.load.duration_s if cfg.load.duration_s is not None else math.inf
    cap = min(cfg.load.requests or MAX_STEADY_REQUESTS, MAX_STEADY_REQUESTS)
    if point.concurrency is not None:  # a closed loop: each draw sent when a client is free
        return [0.0] * cap
    if point.rate is None:
        return [t for t in (trace or []) if t < end][:cap]
    rng = np.random.default_rng(arrival_seed(cfg.seed, workload, temp, point, repeat))
    out = [0.0]
    while len(out) < cap:  # in chunks: the count a duration needs is not known in advance
        gaps = rng.exponential(1.0 / point.rate, 1024)
        more = (out[-1] + np.cumsum(gaps)).tolist()
        out.extend(t for t in more if t < end)
        if more[-1] >= end:
            break
    return out[:cap]


def steady_window(cfg: RunConfig, arrivals: list[float]) -> SteadyWindow:
    """Where the warm-up ends and the arrivals stop (module `SteadyWindow`; defaults in
    docs/serving.md: no warm-up setting means the first WARMUP_SHARE of the window)."""
    load = cfg.load
    by_count = load.requests is not None and len(arrivals) >= load.requests
    end = arrivals[-1] if by_count or load.duration_s is None else load.duration_s
    if load.warmup_s is None and load.warmup_requests is None:
        return SteadyWindow(WARMUP_SHARE * end, end)
    start = load.warmup_s or 0.0
    k = load.warmup_requests or 0
    if 0 < k < len(arrivals):
        start = max(start, arrivals[k])  # the first k arrivals are warm-up
    return SteadyWindow(min(start, end), end)


def draw_prompts(
    cfg: RunConfig, point: LoadPoint, workload: str, temp: float, repeat: int, n: int, k: int
) -> list[int]:
    """`k` prompt indices in [0, n) drawn uniformly with replacement, seeded per batch as the
    arrivals, so every setting is sent the same prompts in the same order."""
    rng = np.random.default_rng(unit_seed(cfg.seed, "draws", workload, temp, point.name, repeat))
    return rng.integers(0, n, size=k).tolist()


def effective_concurrency_notes(cfg: RunConfig, n_prompts: dict[str, int]) -> list[str]:
    """A warning per workload whose prompts cannot fill a configured concurrency: a closed loop
    of c conversations over n < c prompts keeps at most n in flight."""
    notes: list[str] = []
    for wl, n in n_prompts.items():
        over = [c for c in cfg.concurrency if c > n]
        if over:
            notes.append(
                f"workload '{wl}' has {n} prompts: concurrency {', '.join(map(str, over))} cannot "
                f"be reached (effective concurrency {n})"
            )
    return notes
