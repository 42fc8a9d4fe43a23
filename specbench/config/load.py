"""The engine backends' load sections (`backend: vllm` / `openai`; docs/serving.md "Load"):

- `load`: open-loop arrivals beside the closed loop of `concurrency` — requests sent at a given
  rate (seeded Poisson: exponential inter-arrival times) or at a logged trace's timestamps,
  whatever the server's progress, with the number in flight and the wall time of a load point
  bounded;
- `slo`: the latency objectives a request must meet to count towards SLO goodput.

Every size a user can type is bounded here (rates, in-flight bound, duration, trace rows).
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from specbench.config.sections import StrictModel

MAX_RATE = 1_000.0  # requests per second
MAX_RATES = 16  # open-loop rates per run
MAX_IN_FLIGHT = 4_096
MAX_DURATION_S = 86_400.0
MAX_TRACE_ROWS = 100_000
MAX_SLO_MS = 3_600_000.0
MAX_STEADY_REQUESTS = 100_000  # arrivals of one steady-state open-loop batch
WARMUP_SHARE = 0.1  # default warm-up: the first 10 % of the arrival window (docs/serving.md)


class LoadSpec(StrictModel):
    """How requests arrive. `concurrency` (the run's top-level key) is the closed loop, always
    measured (its lowest concurrency is the reference of the verdict); `rates` and `trace` add
    open-loop load points beside it, each its own cell."""

    rates: list[float] = Field(default_factory=list)  # requests per second, Poisson arrivals
    arrival: str = "poisson"  # the inter-arrival law of `rates` (only Poisson is offered)
    # a JSONL file, one request per line with `arrival_s` (seconds from the start) or
    # `timestamp` (epoch seconds or ISO 8601): the i-th prompt of each workload is sent at the
    # i-th arrival (relative to the first)
    trace: str | None = None
    trace_speed: float = Field(default=1.0, gt=0.0, le=1_000.0)  # 2.0 replays twice as fast
    max_in_flight: int = Field(default=256, ge=1, le=MAX_IN_FLIGHT)
    # wall-clock bound of one open-loop batch: requests not sent by then are not sent (counted
    # in the batch's record), and requests still in flight then are recorded as failed
    max_duration_s: float = Field(default=600.0, gt=0.0, le=MAX_DURATION_S)
    # steady state (docs/serving.md "Steady state"): arrivals go on for `duration_s` seconds
    # and/or `requests` requests (whichever ends first), prompts drawn with replacement, and
    # each concurrency c also runs `steady c=C` (c clients drawing until the end); unset, a
    # batch sends each prompt of the workload once
    duration_s: float | None = Field(default=None, gt=0.0, le=MAX_DURATION_S)
    requests: int | None = Field(default=None, ge=2, le=MAX_STEADY_REQUESTS)
    # the warm-up left out of the statistics: arrivals before `warmup_s` seconds and/or the first
    # `warmup_requests` arrivals (the later of the two); neither: the first 10 % of the window
    warmup_s: float | None = Field(default=None, ge=0.0, le=MAX_DURATION_S)
    warmup_requests: int | None = Field(default=None, ge=0, le=MAX_STEADY_REQUESTS)

    @field_validator("rates")
    @classmethod
    def _rates(cls, v: list[float]) -> list[float]:
        if len(v) > MAX_RATES:
            raise ValueError(f"load.rates takes at most {MAX_RATES} rates")
        if any(not 0.0 < r <= MAX_RATE for r in v):
            raise ValueError(f"load.rates must each be in (0, {MAX_RATE:g}] requests per second")
        return sorted(set(v))

    @field_validator("arrival")
    @classmethod
    def _arrival(cls, v: str) -> str:
        if v != "poisson":
            raise ValueError("load.arrival: only 'poisson' is offered (use load.trace to replay)")
        return v

    @model_validator(mode="after")
    def _steady(self) -> LoadSpec:
        if not self.steady:
            if self.warmup_s is not None or self.warmup_requests is not None:
                raise ValueError(
                    "load.warmup_s / load.warmup_requests need load.duration_s or load.requests"
                )
            return self
        if self.duration_s is not None and self.duration_s >= self.max_duration_s:
            raise ValueError(
                f"load.duration_s ({self.duration_s:g} s) must be below load.max_duration_s "
                f"({self.max_duration_s:g} s), which leaves the requests in flight time to drain"
            )
        if self.duration_s is not None and (self.warmup_s or 0.0) >= self.duration_s:
            raise ValueError(
                f"load.warmup_s ({self.warmup_s:g} s) must be below load.duration_s "
                f"({self.duration_s:g} s)"
            )
        if self.requests is not None and (self.warmup_requests or 0) >= self.requests - 1:
            raise ValueError(
                f"load.warmup_requests ({self.warmup_requests}) must leave at least 2 of "
                f"load.requests ({self.requests}) in the steady state"
            )
        return self

    @property
    def open_loop(self) -> bool:
        return bool(self.rates) or self.trace is not None

    @property
    def steady(self) -> bool:
        """Open-loop batches run for a duration / request count (prompts with replacement)."""
        return self.duration_s is not None or self.requests is not None


class SloSpec(StrictModel):
    """Per-request latency objectives (ms); a request meets the SLO when it meets every one set.
    TTFT is its first turn's, TPOT its (e2e − TTFT) / (tokens − 1), e2e its whole latency (as
    vLLM's benchmark_serving `--goodput` defines them)."""

    ttft_ms: float | None = Field(default=None, gt=0.0, le=MAX_SLO_MS)
    tpot_ms: float | None = Field(default=None, gt=0.0, le=MAX_SLO_MS)
    e2e_ms: float | None = Field(default=None, gt=0.0, le=MAX_SLO_MS)

    @property
    def any(self) -> bool:
        return any(x is not None for x in (self.ttft_ms, self.tpot_ms, self.e2e_ms))
