"""What the decision at the deployment profile is taken on (docs/theory.md §22): each setting's
steady-state runs of the mix per load point and block (`LoadRun`, its `TimedRequest`s), the SLO
a request is good under (`SloTargets`), the objective per block summed over the load points
(`block_rates`), and what buffered streams — requests whose TTFT and TPOT were not measured —
leave open (`buffered_doubt`, §22 "Buffered streams")."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from specbench.analysis.stats import block_t
from specbench.analysis.stats.latency_tails import Slo
from specbench.analysis.stats.signflip import RatioPivots
from specbench.config.profile import Objective

OFF = "off"
GOODPUT: Objective = "slo_goodput"
COST: Objective = "cost_per_mtok"


@dataclass(frozen=True)
class TimedRequest:
    """One request of a steady window (warm-up left out), its latencies including the client's
    wait (queue_ms)."""

    arrival_s: float
    ok: bool
    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float | None
    new_tokens: int
    # its stream arrived in one burst (analysis.serving.buffering): its TPOT was not measured and
    # its TTFT is an upper bound (the first token came no later); its e2e is exact
    buffered: bool = False


@dataclass(frozen=True)
class LoadRun:
    """One setting's steady-state run of the mix at one load point in one block."""

    setting: str  # OFF for the baseline
    gamma: int
    load: str  # the load point's name ("rate=2", "steady c=4", "trace")
    block: int  # the repeat (with engine.interleave: the engine start)
    window_s: tuple[float, float]
    requests: tuple[TimedRequest, ...]
    drafter: str = ""  # the setting's label (what the paste-ready line names)
    schedule: tuple[tuple[int, int, int], ...] | None = None  # a γ schedule by batch size


@dataclass(frozen=True)
class SloTargets:
    """Per-request limits (a good request meets every one) and, per metric, the share of
    requests the SLO asks to meet it (the profile's percentile; None: no percentile target)."""

    limits: Slo
    percentiles: Mapping[str, float] = field(default_factory=dict)

    def good(self, r: TimedRequest, buffered_met: bool | None = None) -> bool:
        """Whether a request met every limit. A buffered one (TimedRequest.buffered) is taken
        as measured with `buffered_met` None; with True it is counted as meeting the TTFT and
        TPOT limits its stream could not show (only its exact e2e is checked); with False as
        missing a TPOT limit (its measured TTFT, an upper bound, still counts where it is met)."""
        if not (r.ok and r.ttft_ms is not None and r.e2e_ms is not None):
            return False
        if r.buffered and buffered_met is True:
            return self.limits.e2e_ms is None or r.e2e_ms <= self.limits.e2e_ms
        if r.buffered and buffered_met is False and self.limits.tpot_ms is not None:
            return False
        return self.limits.met(r.ttft_ms, r.tpot_ms, r.e2e_ms)

    def stream_bound(self) -> bool:
        """Whether a buffered stream can change whether a request is good: a TTFT or TPOT
        limit is set."""
        return self.limits.ttft_ms is not None or self.limits.tpot_ms is not None


def run_rate(
    run: LoadRun, slo: SloTargets, objective: str, buffered_met: bool | None = None
) -> float:
    """The objective over a run's steady window: good requests (or their output tokens) that
    arrived in it, per second of window (`buffered_met`: SloTargets.good)."""
    start, end = run.window_s
    if end <= start:
        return math.nan
    good = [r for r in run.requests if slo.good(r, buffered_met)]
    return float(sum(r.new_tokens for r in good) if objective == COST else len(good)) / (
        end - start
    )


def block_rates(
    runs: Sequence[LoadRun], names: list[str], slo: SloTargets, objective: str,
    shares: Mapping[str, float], off_met: bool | None = None, on_met: bool | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """(y (K, B), x (B,)): per block, each setting's objective summed over the profile's load
    points weighted by their shares of time, over the blocks where every setting ran every
    load point (`off_met` / `on_met`: how OFF's / the candidates' buffered streams count,
    SloTargets.good)."""
    by = {(r.setting, r.load, r.block): r for r in runs}
    blocks = sorted(
        b for b in {r.block for r in runs}
        if all((s, ld, b) in by for s in (OFF, *names) for ld in shares)
    )  # fmt: skip
    if not blocks:
        return None

    def rate(s: str, b: int) -> float:
        met = off_met if s == OFF else on_met
        return sum(w * run_rate(by[(s, ld, b)], slo, objective, met) for ld, w in shares.items())

    y = np.asarray([[rate(s, b) for b in blocks] for s in names])
    x = np.asarray([rate(OFF, b) for b in blocks])
    return y, x


def buffered_doubt(
    runs: Sequence[LoadRun], names: list[str], slo: SloTargets, objective: str,
    shares: Mapping[str, float], line: float, alpha: float, outcome: str, k: int,
) -> str | None:  # fmt: skip
    """Why ON for candidate k (or OFF) does not hold once the buffered streams' unmeasured
    TTFT / TPOT are counted at the end least kind to it — the candidates' as missing the SLO
    and OFF's as meeting it for ON, the reverse for OFF (docs/theory.md §22, "Buffered
    streams"); None where it holds, or no buffered stream can change a request's standing."""
    n_buf, n = buffered_count(runs, slo, shares)
    if not n_buf:
        return None
    on = outcome == "on"
    ends = block_rates(runs, names, slo, objective, shares, off_met=on, on_met=not on)
    if ends is not None and ends[1].sum() > 0:  # else OFF met the SLO nowhere: no ratio
        piv = RatioPivots(ends[0], np.broadcast_to(ends[1], ends[0].shape).copy())
        d = block_t.decide(piv, line, alpha)
        if d.outcome == outcome and (not on or piv.t_at(k, line) >= d.critical_on):
            return None
    return (
        f"{n_buf} of {n} requests at the profile arrived as buffered streams, their TTFT "
        f'and TPOT not measured (docs/serving.md "Buffered streams"); counted against '
        f"{outcome.upper()}, the data no longer say {outcome.upper()}: can't tell — find what "
        "holds the streams back (a gateway, a starved client or server process), measure again"
    )


def buffered_count(
    runs: Sequence[LoadRun], slo: SloTargets, shares: Mapping[str, float]
) -> tuple[int, int]:
    """(buffered streams that could change a request's standing, requests) at the profile's
    load points: none counted without a TTFT or TPOT limit."""
    reqs = [q for r in runs if r.load in shares for q in r.requests]
    return (sum(q.buffered for q in reqs) if slo.stream_bound() else 0), len(reqs)


def buffered_note(runs: Sequence[LoadRun], slo: SloTargets, shares: Mapping[str, float]) -> str:
    """An UNDECIDED's word on the buffered streams: more blocks measure what the streams show,
    not what they hid (a TPOT they did not show is not within a percentile target either)."""
    n_buf, n = buffered_count(runs, slo, shares)
    return (
        f'; {n_buf} of {n} requests arrived as buffered streams (docs/serving.md "Buffered '
        'streams"): their TTFT and TPOT were not measured'
        if n_buf
        else ""
    )
