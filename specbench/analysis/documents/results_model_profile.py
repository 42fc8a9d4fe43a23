"""results.json's `profile_decision`: the one configuration for a server at the deployment
profile (`analysis.decide.profile_decision`, docs/theory.md §22; docs/results.md)."""

from __future__ import annotations

from typing import Literal

from specbench.analysis.documents.results_model_base import (
    EstimateJSON,
    Num,
    ResultsModel,
    Verdict,
)


class SloAttainment(ResultsModel):
    """At one load point: the share of requests within each limit that has a percentile
    target, and whether every target was met (point estimates: an eligibility filter)."""

    load: str
    shares: dict[str, Num]
    met: bool


class ServerPriceJSON(ResultsModel):
    """The price the costs use: the profile's (its unset parts the run's `economics`)."""

    gpu_hour_usd: float
    gpus_per_server: int


class ProfileCandidate(ResultsModel):
    setting: str
    drafter: str
    gamma: int
    schedule: list[list[int]] | None = None
    gain: EstimateJSON  # its objective over OFF's, with the marginal interval
    decision_lower_bound: Num  # simultaneous (max-T over the candidates)
    decision_upper_bound: Num
    rate_per_s: Num  # its objective: good requests (or good tokens) per s, time-share weighted
    attainment: list[SloAttainment]
    eligible: bool  # met every percentile target at every load point
    acceptance: Num = None  # the engine's acceptance rate in the mix batches, where counted
    break_even_alpha: Num = None  # the acceptance at which it stops paying at this load
    # with a price: $ per 10⁶ good output tokens at the profile, its interval from the blocks
    cost_per_mtok: EstimateJSON | None = None


class ProfileDecision(ResultsModel):
    verdict: Verdict
    chosen: str | None
    drafter: str | None = None
    gamma: int = 0
    schedule: list[list[int]] | None = None
    objective: Literal["slo_goodput", "cost_per_mtok"]
    unit: str  # what the objective counts per second
    margin: float
    false_on_rate: float
    false_off_rate: float
    off_rate_per_s: Num
    off_attainment: list[SloAttainment]
    price: ServerPriceJSON | None = None  # the profile's price, when it has one
    off_cost_per_mtok: EstimateJSON | None = None  # OFF's $ per 10⁶ good output tokens
    candidates: list[ProfileCandidate]
    loads: dict[str, float]  # load point → its share of time
    mix: dict[str, float]  # workload → share of output tokens, as the profile asks
    slo: dict[str, str]  # metric → "p99 ≤ 500 ms" (the per-request limit and its percentile)
    blocks: int
    critical_value: Num
    blocks_needed: int | None
    interleaved: bool
    rule: str
    reason: str
