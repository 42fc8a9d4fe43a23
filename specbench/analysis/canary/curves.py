"""Every guard's sequence after each window: the curves the report draws, and the first look at
which a continuously monitored canary would have decided (the simulations and the benchmark use
it: `first_decision`). Same sequences and rules as `decision`, computed for all looks at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.analysis.canary.decision import all_guards
from specbench.analysis.canary.guards import Guard
from specbench.analysis.canary.sequences import running_bounds
from specbench.analysis.canary.windows import WindowPair
from specbench.config.canary import CanaryConfig


@dataclass(frozen=True)
class Curve:
    """One guard after each window t = 1…T (NaN / ±inf where it has no value yet)."""

    guard: Guard
    n: np.ndarray  # windows with a value, up to t
    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def guard_curve(
    g: Guard, windows: Sequence[WindowPair], side_alpha: float, cfg: CanaryConfig
) -> Curve:
    raw = [g.stat(w) for w in windows]
    ok = np.array([v is not None and np.isfinite(v) for v in raw], bool)
    vals = np.array([v for v, good in zip(raw, ok, strict=True) if good], float)
    est, lo, hi = running_bounds(vals, g.kind, side_alpha, cfg.n_opt, cfg.min_windows)
    n = np.cumsum(ok)
    idx = n - 1  # the value index each window's look ends at (−1: none yet)
    have = idx >= 0
    pick = np.maximum(idx, 0)

    def at(a: np.ndarray, fill: float) -> np.ndarray:
        return np.where(have, a[pick] if len(a) else fill, fill)

    return Curve(g, n, at(est, np.nan), at(lo, -np.inf), at(hi, np.inf))


def curves(
    cfg: CanaryConfig,
    windows: Sequence[WindowPair],
    break_even: dict[str, tuple[float, int]] | None = None,
) -> tuple[list[Curve], float]:
    """Every guard's curve and the per-end level α/2K they were built at."""
    guards, k, _ = all_guards(cfg, windows, break_even)
    side_alpha = cfg.alpha / (2 * k)
    return [guard_curve(g, windows, side_alpha, cfg) for g in guards], side_alpha


def _status(c: Curve) -> tuple[np.ndarray, np.ndarray]:
    """(crossed, ok) after each window."""
    g = c.guard
    if g.harm == "above":
        return c.lower > g.line, c.upper < g.line
    if g.harm == "below":
        return c.upper < g.line, c.lower > g.line
    hi, lo = g.center + g.line, g.center - g.line
    return (c.lower > hi) | (c.upper < lo), (c.lower > lo) & (c.upper < hi)


@dataclass(frozen=True)
class FirstDecision:
    action: str  # "rollback", "promote" or "keep_watching" (never settled)
    window: int  # 1-based look at which it was taken (the last window when never settled)
    crossed: tuple[str, ...]


def first_decision(
    cfg: CanaryConfig,
    windows: Sequence[WindowPair],
    break_even: dict[str, tuple[float, int]] | None = None,
) -> FirstDecision:
    """The first look, checking after every window, at which the canary rolls back or promotes
    (guards without any value never block promotion, as in `decide`)."""
    cs, _ = curves(cfg, windows, break_even)
    t_all = len(windows)
    crossed = np.zeros(t_all, bool)
    all_ok = np.ones(t_all, bool)
    for c in cs:
        x, ok = _status(c)
        live = c.n[-1] > 0 if t_all else False
        crossed |= x
        if live:
            all_ok &= ok
    settled = crossed | all_ok
    if not settled.any():
        return FirstDecision("keep_watching", t_all, ())
    t = int(np.argmax(settled))
    if crossed[t]:
        names = tuple(c.guard.key for c in cs if _status(c)[0][t])
        return FirstDecision("rollback", t + 1, names)
    return FirstDecision("promote", t + 1, ())
