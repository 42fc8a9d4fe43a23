"""One paired time window of a canary: what each arm served over the same minutes.

Both arms see the same load swings in a window, so the window is the unit of every guard's
confidence sequence (docs/theory.md §20). A source (request logs, a `/metrics` scrape, the
Prometheus HTTP API) reduces each arm's traffic in the window to an `ArmWindow`; the canary's
state file holds one `WindowPair` per line, appended as each window closes, so a restarted
canary resumes its sequences where they were.

`center` says how the latency and length centres were obtained: "median" from per-request rows,
"mean" from a histogram's _sum / _count (exact, where an interpolated median would not be:
docs/canary.md, "Bucketed data").
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tally(_Model):
    """How many of `n` requests have a property (over an SLO, cut by the length limit, …)."""

    hits: NonNegativeInt
    n: NonNegativeInt


class Acceptance(_Model):
    """A bucket's speculative-decoding counts in one window (the canary's)."""

    accepted: NonNegativeFloat
    proposed: NonNegativeFloat
    drafts: NonNegativeFloat | None = None  # rounds; gives γ = proposed / drafts


class ArmWindow(_Model):
    """One arm's traffic in one window; a field is None when the source does not provide it."""

    requests: NonNegativeInt
    errors: NonNegativeInt = 0
    center: Literal["median", "mean"] = "median"
    tpot_ms: NonNegativeFloat | None = None
    e2e_ms: NonNegativeFloat | None = None
    tpot_over_slo: Tally | None = None
    e2e_over_slo: Tally | None = None
    output_tokens: NonNegativeFloat | None = None
    finish_length: Tally | None = None  # requests stopped by the length limit
    degenerate: Tally | None = None  # empty or repetitive answers (docs/theory.md §13)
    acceptance: dict[str, Acceptance] = Field(default_factory=dict)  # by bucket


class WindowPair(_Model):
    """Both arms over [start, end) (Unix seconds). `seq` orders the windows: the epoch-aligned
    window index (start = seq · window_s) for logs and the Prometheus API, a count for scrapes."""

    seq: NonNegativeInt
    start: float
    end: float
    canary: ArmWindow
    control: ArmWindow
    source: str = ""

    @property
    def seconds(self) -> float:
        return self.end - self.start


_LATENCY = ("tpot_ms", "e2e_ms", "tpot_over_slo", "e2e_over_slo", "output_tokens")


def merge_arm(logs: ArmWindow, metrics: ArmWindow) -> ArmWindow:
    """One arm's window from request logs and engine metrics over the same minutes: the logs'
    per-request figures win; the metrics fill what the logs lack (acceptance counters when rows
    carry none, and latency only when the logs have no latency at all, so that one window never
    mixes medians with means)."""
    out = logs.model_copy()
    if not logs.acceptance:
        out.acceptance = dict(metrics.acceptance)
    if all(getattr(logs, f) is None for f in _LATENCY):
        for f in _LATENCY:
            setattr(out, f, getattr(metrics, f))
        out.center = metrics.center
    for f in ("finish_length", "degenerate"):
        if getattr(logs, f) is None:
            setattr(out, f, getattr(metrics, f))
    return out
