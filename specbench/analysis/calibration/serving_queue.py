"""A seeded continuous-batching server, to measure the decision at the profile's error rates and
power (`analysis.decide.profile_decision`, docs/theory.md §22) on data as unkind as real traffic.

The server admits arrived requests up to `max_batch` and advances every running request each
step. OFF decodes one token a step, the step costing `step_ms·(1 + slope·(b − 1))` at b in flight;
a speculative setting drafts γ tokens (each draft step `draft_cost` target steps) and verifies
b·(γ + 1) positions, emitting per request the accepted prefix plus one token. What makes it
unkind: output lengths lognormal and clipped to [8, 256] (32× apart), acceptance varying across
requests (Beta) and within a request (each position a Bernoulli draw), a per-run speed factor (an
engine start moves every step: sd 5 %), and a per-block drift shared by every setting of the
block (the machine slowing down between blocks: sd 10 %). Every setting of a block serves the same
arrivals and requests (the harness's common draws).

Null (A/A): candidates identical in law to OFF, so every gain is exactly 1: the rate at which the
rule says ON at θ0 = 1 (margin 0) is its false ON rate with the max-T selection over K; OFF at
θ0 = 1 its false OFF rate. Power: a real speculative setting against OFF under an end-to-end limit OFF
cuts into: about 1.27× (end-to-end ≤ 1.2 s, which OFF meets for about 60 % of requests at 4/s
and γ = 3 for about 75 %; per block the gain moves between 1.1 and 1.45).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

from specbench.analysis.decide.profile_decision import (
    decide_at_profile,
)
from specbench.analysis.decide.profile_runs import (
    OFF,
    LoadRun,
    SloTargets,
    TimedRequest,
)
from specbench.analysis.stats.latency_tails import Slo

MIN_LEN, MAX_LEN = 8, 256


@dataclass(frozen=True)
class ServerModel:
    gamma: int = 0
    step_ms: float = 20.0  # a target step at batch 1
    slope: float = 0.04  # step cost growth per extra position in the batch
    draft_cost: float = 0.08  # a draft step, in target steps
    max_batch: int = 16


@dataclass(frozen=True)
class Traffic:
    rate: float = 4.0  # Poisson arrivals per second
    duration_s: float = 40.0
    warmup_share: float = 0.1
    length_median: float = 40.0
    length_sigma: float = 0.8
    alpha_mean: float = 0.7
    alpha_concentration: float = 4.0  # Beta(a, b) with a + b = this: wide across requests


@dataclass(frozen=True)
class Request:
    arrival_s: float
    length: int
    alpha: float


def draw_requests(traffic: Traffic, rng: random.Random) -> list[Request]:
    out: list[Request] = []
    t = 0.0
    a = traffic.alpha_mean * traffic.alpha_concentration
    b = (1.0 - traffic.alpha_mean) * traffic.alpha_concentration
    while True:
        t += rng.expovariate(traffic.rate)
        if t >= traffic.duration_s:
            return out
        length = int(rng.lognormvariate(math.log(traffic.length_median), traffic.length_sigma))
        out.append(Request(t, min(MAX_LEN, max(MIN_LEN, length)), rng.betavariate(a, b)))


def serve(
    model: ServerModel, requests: list[Request], speed: float, rng: random.Random
) -> list[tuple[Request, float, float]]:
    """(request, TTFT s, end-to-end s) per request, in arrival order; a request still running
    at 4× the arrivals' span is cut (returned with NaN: counted as missing the SLO)."""
    waiting = list(range(len(requests)))
    active: list[int] = []
    left = [r.length for r in requests]
    first = [math.nan] * len(requests)
    done = [math.nan] * len(requests)
    horizon = 4.0 * (requests[-1].arrival_s if requests else 0.0) + 1.0
    t, nxt = 0.0, 0
    while (nxt < len(waiting) or active) and t < horizon:
        while nxt < len(waiting) and requests[waiting[nxt]].arrival_s <= t:
            if len(active) >= model.max_batch:
                break
            active.append(waiting[nxt])
            nxt += 1
        if not active:
            t = requests[waiting[nxt]].arrival_s
            continue
        b = len(active)
        g = model.gamma
        positions = b * (g + 1)
        dt = model.step_ms * (1.0 + model.slope * (positions - 1)) + g * model.step_ms * (
            model.draft_cost * (1.0 + model.slope * (b - 1))
        )
        t += dt * speed / 1000.0
        still = []
        for i in active:
            gained = 1
            if g:
                alpha = requests[i].alpha
                while gained <= g and rng.random() < alpha:
                    gained += 1
            if math.isnan(first[i]):
                first[i] = t
            left[i] -= gained
            if left[i] <= 0:
                done[i] = t
            else:
                still.append(i)
        active = still
    return [(r, first[i] - r.arrival_s, done[i] - r.arrival_s) for i, r in enumerate(requests)]


def load_run(
    setting: str, model: ServerModel, traffic: Traffic, block: int,
    requests: list[Request], speed: float, rng: random.Random, load: str = "rate",
) -> LoadRun:  # fmt: skip
    start = traffic.warmup_share * traffic.duration_s
    timed = []
    for r, ttft, e2e in serve(model, requests, speed, rng):
        if r.arrival_s < start:
            continue
        ok = math.isfinite(e2e)
        tpot = (e2e - ttft) / (r.length - 1) * 1000.0 if ok and r.length > 1 else None
        timed.append(
            TimedRequest(
                r.arrival_s, ok, ttft * 1000.0 if ok else None, tpot,
                e2e * 1000.0 if ok else None, r.length,
            )
        )  # fmt: skip
    return LoadRun(setting, model.gamma, load, block, (start, traffic.duration_s), tuple(timed))


def replicate(
    candidates: dict[str, ServerModel], traffic: Traffic, blocks: int, seed: int,
    off: ServerModel | None = None,
) -> list[LoadRun]:  # fmt: skip
    """One run's worth of load runs: OFF and every candidate, `blocks` times, common draws."""
    rng = random.Random(seed)
    runs = []
    settings = {OFF: off or ServerModel(), **candidates}
    for b in range(blocks):
        requests = draw_requests(traffic, rng)
        drift = math.exp(rng.gauss(0.0, 0.10))
        for name, model in settings.items():
            speed = drift * math.exp(rng.gauss(0.0, 0.05))
            runs.append(load_run(name, model, traffic, b, requests, speed, rng))
    return runs


Case = Literal["null", "power"]


def outcome_rates(
    case: Case, reps: int, blocks: int, k: int = 2, seed: int = 0,
    traffic: Traffic | None = None, e2e_limit_ms: float = 1200.0,
) -> dict[str, float]:  # fmt: skip
    """P(ON), P(OFF), P(UNDECIDED) of the decision over `reps` seeded replicates, with the
    Monte Carlo standard error of the largest. `null`: K candidates identical to OFF, decided at
    θ0 = 1 (margin 0). `power`: γ = 3 with a cheap draft against OFF at margin 0.05."""
    traffic = traffic or Traffic()
    slo = SloTargets(Slo(ttft_ms=2000.0, e2e_ms=e2e_limit_ms))
    if case == "null":
        candidates = {f"copy{i}": ServerModel() for i in range(k)}
        margin = 0.0
    else:
        candidates = {"γ=3": ServerModel(gamma=3)}
        margin = 0.05
    counts = {"on": 0, "off": 0, "undecided": 0, "not_measured": 0}
    for r in range(reps):
        runs = replicate(candidates, traffic, blocks, seed * 1_000_003 + r)
        v = decide_at_profile(runs, slo, {"rate": 1.0}, margin=margin)
        counts[v.verdict] += 1
    rates = {k2: c / reps for k2, c in counts.items()}
    p = max(rates["on"], rates["off"])
    rates["mc_se"] = math.sqrt(max(p * (1 - p), 1e-12) / reps)
    return rates
