"""Promote, keep watching or roll back: every guard's confidence sequence against its line
(docs/theory.md §20, docs/canary.md).

Error budget. The K guard sequences (the fixed guards, the acceptance slots fixed in advance, the
sample-ratio check) each get α/K, two-sided (α/2K per end), so all hold at once, at every look,
with probability ≥ 1 − α (Bonferroni over guards × buckets; the sequences themselves absorb the
repeated looks). A guard whose line lies inside its sequence is undecided; one whose sequence lies
wholly on the harm side has crossed; wholly on the safe side, it is non-inferior. So:

    roll back      some guard crossed         P(any wrong roll back) ≤ α (a guard at or inside its margin)
    promote        every guard non-inferior   P(promote with some guard past its margin) ≤ α
    keep watching  otherwise, with about how many more windows (hours, requests) would settle it
    on_timeout     undecided at max_duration_h: the configured default action, said so
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from specbench.analysis.canary.guards import (
    Guard,
    acceptance_guard,
    acceptance_slots,
    fixed_guards,
    floor_for,
)
from specbench.analysis.canary.sequences import (
    Bounds,
    betting_sequence,
    mean_sequence,
    windows_to_settle,
)
from specbench.analysis.canary.windows import WindowPair
from specbench.config.canary import CanaryConfig

Status = Literal["crossed", "ok", "undecided", "unavailable"]
Action = Literal["promote", "keep_watching", "rollback"]


class GuardResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    name: str
    bucket: str | None
    label: str
    kind: str
    harm: str
    line: float
    center: float
    windows: int
    estimate: float | None
    lower: float | None
    upper: float | None
    status: Status
    more_windows: int | None
    evidence: str


class CanaryDecision(BaseModel):
    """What `specbench canary` decided at this look, with its error rate."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["canary"] = "canary"
    name: str
    decision: Action
    reason: str
    timed_out: bool
    alpha: float
    sequences: int  # K: the family the α is split over
    side_alpha: float
    windows: int
    window_s: float
    elapsed_h: float
    requests_canary: int
    requests_control: int
    crossed: list[str]
    more_windows: int | None
    more_hours: float | None
    more_requests: int | None
    guards: list[GuardResult]
    notes: list[str]


def measured_gamma(windows: Sequence[WindowPair]) -> int | None:
    """γ as the canary's counters show it: proposed ÷ drafts over every window, rounded."""
    proposed = drafts = 0.0
    for w in windows:
        for a in w.canary.acceptance.values():
            if a.drafts:
                proposed += a.proposed
                drafts += a.drafts
    return max(round(proposed / drafts), 1) if drafts > 0 else None


def _buckets(cfg: CanaryConfig, windows: Sequence[WindowPair]) -> tuple[list[str], list[str]]:
    """(tested buckets, buckets seen but left untested past the fixed number of slots)."""
    seen: list[str] = []
    for w in windows:
        seen += [b for b in w.canary.acceptance if b not in seen]
    a = cfg.guards.acceptance
    if a is None:
        return [], []
    if a.buckets:
        return list(a.buckets), [b for b in seen if b not in a.buckets]
    return seen[: a.max_buckets], seen[a.max_buckets :]


def all_guards(
    cfg: CanaryConfig,
    windows: Sequence[WindowPair],
    break_even: dict[str, tuple[float, int]] | None = None,
) -> tuple[list[Guard], int, list[str]]:
    """The guards tested now, K (the family size, fixed in advance) and notes."""
    guards = fixed_guards(cfg)
    k = len(guards) + acceptance_slots(cfg)
    notes: list[str] = []
    tested, untested = _buckets(cfg, windows)
    if untested:
        notes.append(
            f"buckets past the {len(tested)} acceptance slots are not tested: "
            + ", ".join(untested[:10])
        )
    a = cfg.guards.acceptance
    if a is not None:
        gamma = measured_gamma(windows)
        for b in tested:
            guards.append(acceptance_guard(b, floor_for(a, b, gamma, break_even or {})))
    return guards, k, notes


def sequence_of(g: Guard, values: np.ndarray, side_alpha: float, cfg: CanaryConfig) -> Bounds:
    if g.kind == "betting":
        return betting_sequence(values, side_alpha, cfg.min_windows)
    return mean_sequence(values, side_alpha, cfg.n_opt, cfg.min_windows)


def judge(g: Guard, b: Bounds) -> Status:
    """Where the sequence lies against the guard's line (module docstring)."""
    if b.n == 0:
        return "unavailable"
    if g.harm == "above":
        return "crossed" if b.lower > g.line else "ok" if b.upper < g.line else "undecided"
    if g.harm == "below":
        return "crossed" if b.upper < g.line else "ok" if b.lower > g.line else "undecided"
    hi, lo = g.center + g.line, g.center - g.line
    if b.lower > hi or b.upper < lo:
        return "crossed"
    return "ok" if lo < b.lower and b.upper < hi else "undecided"


def settle_line(g: Guard, b: Bounds) -> float:
    """The line whose exclusion would settle an undecided guard: the nearest one."""
    if g.harm != "either":
        return g.line
    hi, lo = g.center + g.line, g.center - g.line
    return hi if abs(b.estimate - hi) <= abs(b.estimate - lo) else lo


def _evidence(g: Guard, b: Bounds, status: Status) -> str:
    if status == "unavailable":
        return "no window has this quantity on both sides (the source does not provide it)"
    lines = (
        f"{g.center - g.line:.4g} … {g.center + g.line:.4g}"
        if g.harm == "either"
        else f"{g.line:.4g}"
    )
    return (
        f"{g.label}: {b.estimate:.4g} over {b.n} windows, always-valid interval "
        f"[{b.lower:.4g}, {b.upper:.4g}] against {lines} (harm {g.harm})"
    )


def evaluate_guard(
    g: Guard, windows: Sequence[WindowPair], side_alpha: float, cfg: CanaryConfig
) -> GuardResult:
    vals = [v for v in (g.stat(w) for w in windows) if v is not None and math.isfinite(v)]
    b = sequence_of(g, np.asarray(vals, float), side_alpha, cfg)
    status = judge(g, b)
    more = None
    if status == "undecided":
        more = windows_to_settle(b, settle_line(g, b), side_alpha, cfg.n_opt)
        if more is not None:  # undecided now: at least one more window, whatever the projection
            more = max(more, 1)
        if b.n < cfg.min_windows:
            more = max(more or 0, cfg.min_windows - b.n)

    def num(x: float) -> float | None:
        return x if math.isfinite(x) else None

    return GuardResult(
        key=g.key,
        name=g.name,
        bucket=g.bucket,
        label=g.label,
        kind=b.kind,
        harm=g.harm,
        line=g.line,
        center=g.center,
        windows=b.n,
        estimate=num(b.estimate),
        lower=num(b.lower),
        upper=num(b.upper),
        status=status,
        more_windows=more,
        evidence=_evidence(g, b, status),
    )


def decide(
    cfg: CanaryConfig,
    windows: Sequence[WindowPair],
    break_even: dict[str, tuple[float, int]] | None = None,
) -> CanaryDecision:
    """The decision after every window so far (module docstring)."""
    guards, k, notes = all_guards(cfg, windows, break_even)
    side_alpha = cfg.alpha / (2 * k)
    results = [evaluate_guard(g, windows, side_alpha, cfg) for g in guards]
    crossed = [r.key for r in results if r.status == "crossed"]
    live = [r for r in results if r.status != "unavailable"]
    elapsed_h = (windows[-1].end - windows[0].start) / 3600 if windows else 0.0
    req_c = sum(w.canary.requests for w in windows)
    req_k = sum(w.control.requests for w in windows)
    for r in results:
        if r.status == "unavailable":
            notes.append(f"{r.key}: not tested, {r.evidence}")
    undecided = [r for r in live if r.status == "undecided"]
    more = None
    if not crossed and undecided and all(r.more_windows is not None for r in undecided):
        more = max(r.more_windows or 0 for r in undecided)
    timed_out = False
    if crossed:
        action: Action = "rollback"
        reason = "guard crossed: " + "; ".join(r.evidence for r in results if r.status == "crossed")
    elif live and not undecided:
        action, reason = "promote", "every guard is non-inferior at its margin"
    elif elapsed_h >= cfg.max_duration_h:
        action, timed_out = cfg.on_timeout, True
        reason = (
            f"undecided after {elapsed_h:.1f} h (max_duration_h {cfg.max_duration_h:g}): the "
            f"configured default action ({cfg.on_timeout}); still open: "
            + ", ".join(r.key for r in undecided)
        )
    else:
        action = "keep_watching"
        reason = "still open: " + (", ".join(r.key for r in undecided) or "no data yet")
    per_window = (req_c + req_k) / len(windows) if windows else 0.0
    return CanaryDecision(
        name=cfg.name,
        decision=action,
        reason=reason,
        timed_out=timed_out,
        alpha=cfg.alpha,
        sequences=k,
        side_alpha=side_alpha,
        windows=len(windows),
        window_s=cfg.window_s,
        elapsed_h=elapsed_h,
        requests_canary=req_c,
        requests_control=req_k,
        crossed=crossed,
        more_windows=more if action == "keep_watching" else None,
        more_hours=more * cfg.window_s / 3600
        if more is not None and action == "keep_watching"
        else None,
        more_requests=round(more * per_window)
        if more is not None and action == "keep_watching"
        else None,
        guards=results,
        notes=notes,
    )
