"""The guards of a speculative canary and the per-window statistic each reads (docs/canary.md).

A guard turns a `WindowPair` into one number (or None when a side has nothing to say in that
window) and says which side of its line is harm:

    tpot / e2e           log(canary ÷ control) of the window's median (mean from histograms);
                         harm above log(1 + margin)
    tpot_slo / e2e_slo   canary − control share of requests over the SLO; harm above slo_margin
    errors               canary − control share of failed requests; harm above margin
    acceptance[bucket]   the canary's accepted / proposed; harm below the floor (`floor_for`);
                         a betting sequence (values in [0, 1]), every other guard a mean one
    output_length        log(canary ÷ control) of the median output length; harm beyond ±margin
    finish_length        canary − control share cut by the length limit; harm beyond ±margin
    degenerate           canary − control share of degenerate answers; harm above margin
    sample_ratio         canary ÷ (canary + control) requests; harm beyond expected ± tolerance

ITL step histograms (vLLM's inter-token latency) count engine steps, and a speculative step
emits several tokens, so they are never compared as if per token: the latency guards read TPOT
and end-to-end latency only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from specbench.analysis.arithmetic import roi
from specbench.analysis.canary.windows import ArmWindow, Tally, WindowPair
from specbench.config.canary import AcceptanceGuard, CanaryConfig

Harm = Literal["above", "below", "either"]
Stat = Callable[[WindowPair], float | None]


@dataclass(frozen=True)
class Guard:
    """One tested quantity: its statistic, the sequence it uses, where harm lies."""

    name: str
    label: str  # what the statistic is, for the report
    stat: Stat
    kind: Literal["mean", "betting"]
    harm: Harm
    line: float  # harm above / below it; for "either": the distance allowed from `center`
    center: float = 0.0
    bucket: str | None = None

    @property
    def key(self) -> str:
        return f"{self.name}[{self.bucket}]" if self.bucket is not None else self.name


def _share(t: Tally | None) -> float | None:
    return None if t is None or t.n == 0 else t.hits / t.n


def _diff(get: Callable[[ArmWindow], float | None]) -> Stat:
    def stat(w: WindowPair) -> float | None:
        a, b = get(w.canary), get(w.control)
        return None if a is None or b is None else a - b

    return stat


def _log_ratio(get: Callable[[ArmWindow], float | None]) -> Stat:
    def stat(w: WindowPair) -> float | None:
        a, b = get(w.canary), get(w.control)
        if a is None or b is None or a <= 0 or b <= 0:
            return None
        return math.log(a / b)

    return stat


def _error_share(a: ArmWindow) -> float | None:
    return a.errors / a.requests if a.requests else None


def _sample_ratio(w: WindowPair) -> float | None:
    total = w.canary.requests + w.control.requests
    return w.canary.requests / total if total else None


def _acceptance(bucket: str) -> Stat:
    def stat(w: WindowPair) -> float | None:
        acc = w.canary.acceptance.get(bucket)
        return None if acc is None or acc.proposed <= 0 else min(acc.accepted / acc.proposed, 1.0)

    return stat


def ratio_floor_from_alpha(alpha: float, gamma: int) -> float:
    """accepted / proposed expected at per-token acceptance α and γ drafted tokens:
    (ā(γ, α) − 1) / γ (docs/theory.md §2–3), so a break-even α becomes a floor on what the
    engine's counters report."""
    return (roi.expected_tokens(gamma, alpha) - 1.0) / gamma


@dataclass(frozen=True)
class Floor:
    value: float
    source: str  # where it came from, for the report


def floor_for(
    cfg: AcceptanceGuard, bucket: str, gamma: int | None, break_even: dict[str, tuple[float, int]]
) -> Floor:
    """The accepted / proposed floor of one bucket: the configured floor, else the break-even α
    of that bucket (or of the overall bucket) from accept.json, else the rule-of-thumb floors
    (accepted / proposed ≥ min_ratio and mean accepted length ≥ min_length, which at γ drafted
    tokens per round is accepted / proposed ≥ (min_length − 1) / γ), whichever is higher."""
    if cfg.floor is not None:
        return Floor(cfg.floor, "configured floor")
    be = break_even.get(bucket) or break_even.get("overall")
    if be is not None:
        alpha, be_gamma = be
        g_be = cfg.gamma or be_gamma
        return Floor(
            ratio_floor_from_alpha(alpha, g_be),
            f"break-even α = {alpha:.3f} at γ = {g_be} (accept)",
        )
    g = cfg.gamma or gamma
    if g is None:
        return Floor(cfg.min_ratio, f"rule of thumb: accepted/proposed ≥ {cfg.min_ratio:g}")
    by_length = (cfg.min_length - 1.0) / g
    if by_length > cfg.min_ratio:
        return Floor(
            by_length, f"rule of thumb: mean accepted length ≥ {cfg.min_length:g} at γ = {g}"
        )
    return Floor(cfg.min_ratio, f"rule of thumb: accepted/proposed ≥ {cfg.min_ratio:g}")


def fixed_guards(cfg: CanaryConfig) -> list[Guard]:
    """Every guard but acceptance, as configured (their number is fixed before any data)."""
    g = cfg.guards
    out: list[Guard] = []
    for name, lat in (("tpot", g.tpot), ("e2e", g.e2e)):
        if lat is None:
            continue
        field_ms = f"{name}_ms"
        slo_field = f"{name}_over_slo"
        out.append(
            Guard(
                name,
                f"log({name.upper()} canary ÷ control)",
                _log_ratio(lambda a, f=field_ms: getattr(a, f)),  # type: ignore[misc]
                "mean",
                "above",
                math.log1p(lat.margin),
            )
        )
        if lat.slo_ms is not None:
            out.append(
                Guard(
                    f"{name}_slo",
                    f"share over {lat.slo_ms:g} ms, canary − control",
                    _diff(lambda a, f=slo_field: _share(getattr(a, f))),  # type: ignore[misc]
                    "mean",
                    "above",
                    lat.slo_margin,
                )
            )
    if g.errors is not None:
        out.append(
            Guard(
                "errors",
                "error share, canary − control",
                _diff(_error_share),
                "mean",
                "above",
                g.errors.margin,
            )
        )
    if g.output is not None:
        o = g.output
        out.append(
            Guard(
                "output_length",
                "log(output tokens canary ÷ control)",
                _log_ratio(lambda a: a.output_tokens),
                "mean",
                "either",
                math.log1p(o.length_margin),
            )
        )
        out.append(
            Guard(
                "finish_length",
                "share cut by the length limit, canary − control",
                _diff(lambda a: _share(a.finish_length)),
                "mean",
                "either",
                o.finish_margin,
            )
        )
        out.append(
            Guard(
                "degenerate",
                "degenerate share, canary − control",
                _diff(lambda a: _share(a.degenerate)),
                "mean",
                "above",
                o.degenerate_margin,
            )
        )
    t = cfg.traffic
    out.append(
        Guard(
            "sample_ratio",
            "canary ÷ (canary + control) requests",
            _sample_ratio,
            "mean",
            "either",
            t.tolerance,
            center=t.expected,
        )
    )
    return out


def acceptance_guard(bucket: str, floor: Floor) -> Guard:
    return Guard(
        "acceptance",
        f"accepted/proposed ({floor.source})",
        _acceptance(bucket),
        "betting",
        "below",
        floor.value,
        bucket=bucket,
    )


def acceptance_slots(cfg: CanaryConfig) -> int:
    """How many acceptance sequences the error budget is split over, fixed in advance: the
    configured buckets, else `max_buckets` (buckets past it are pooled as "other")."""
    a = cfg.guards.acceptance
    if a is None:
        return 0
    return len(a.buckets) if a.buckets else a.max_buckets
