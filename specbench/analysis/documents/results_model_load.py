"""results.json models of an engine entry's load cells (`engine.load`, `analysis.serving.load_cells`):
latency tails with order-statistic intervals and SLO goodput per setting × load
point."""

from __future__ import annotations

from specbench.analysis.documents.results_model_base import EstimateJSON, Num, ResultsModel


class QuantilesCI(ResultsModel):
    """p50 / p90 / p99 with their order-statistic intervals (docs/theory.md §16); a value is
    null below 1 / (1 − p) requests, an end null where the sample cannot bound it."""

    p50: EstimateJSON
    p90: EstimateJSON
    p99: EstimateJSON


class Goodput(ResultsModel):
    """Requests meeting every SLO set, per second of the cell's duration (and their tokens)."""

    n: int
    good: int
    share: EstimateJSON
    requests_per_s: EstimateJSON
    output_tokens_per_s: EstimateJSON | None


class SloJSON(ResultsModel):
    ttft_ms: Num = None
    tpot_ms: Num = None
    e2e_ms: Num = None


class WarmupExcluded(ResultsModel):
    n: int  # requests that arrived in the warm-up
    seconds: Num  # warm-up length, summed over the repeats


class QueueingGrowth(ResultsModel):
    """Latency from arrival (client wait + TTFT) against arrival time across the steady state:
    Kendall's τ (one-sided p) and the Theil–Sen rise; `growing` by docs/theory.md §21's rule."""

    n: int
    tau: Num
    p_value: Num
    slope_ms_per_s: Num
    rise_ms: Num
    baseline_ms: Num
    growing: bool


class SteadyState(ResultsModel):
    """A steady-state open-loop cell (`load.duration_s` / `load.requests`): the window's length,
    the warm-up left out, arrivals and completions per second of it, and whether the server kept
    up (None: too few requests to tell)."""

    steady_duration_s: Num
    warmup_excluded: WarmupExcluded
    arrival_rate: Num
    achieved_rate: Num
    achieved_tokens_per_s: Num
    n_drain: int
    queueing_growth: QueueingGrowth | None
    kept_up: bool | None


class LoadCell(ResultsModel):
    """One setting at one load point: closed loop at `concurrency`, or open loop (`rate=R`,
    `trace`) with at most `max_in_flight` in flight."""

    gamma: int
    drafter: str
    load: str
    concurrency: int | None
    effective_concurrency: int | None
    max_in_flight: int | None
    offered_rate: Num
    n: int
    n_failed: int
    duration_s: Num
    requests_per_s: Num
    output_tokens_per_s: Num
    ttft_ms: QuantilesCI
    tpot_ms: QuantilesCI
    e2e_ms: QuantilesCI
    queue_ms_max: Num
    not_sent: int
    hit_bound: bool
    buffered_requests: int
    tpot_meaningless: bool
    goodput: Goodput | None
    steady: SteadyState | None = None


class MixCell(LoadCell):
    """One setting at one load point of the profile's mix (`analysis.serving.mix_batches`): the
    load cell's figures over every workload's requests, and each workload's share of the output
    tokens of the window's completed requests."""

    token_shares: dict[str, Num]


class MixSection(ResultsModel):
    """The profile's mix under steady-state load (docs/serving.md "The profile's mix"): the shares
    asked (output tokens by workload, requests by temperature), the request shares drawn with
    (token share ÷ mean max_tokens, normalised) and one cell per setting × load point."""

    token_shares: dict[str, float]
    request_shares: dict[str, float]
    temperature_shares: dict[str, float]
    mean_max_tokens: dict[str, float]
    cells: list[MixCell]
    warnings: list[str]
