"""The deployment profile (`profile:` in a run config; docs/configuration.md "Deployment profile"):
where a serving team operates — the traffic mix, the load, the latency objectives, the price of
a server — so that a decision can be taken there rather than at batch 1.

    profile:
      traffic:
        workloads: {tiny_code: 0.6, tiny_prose: 0.4}   # shares of output tokens
        temperatures: {0: 0.7, 1.0: 0.3}               # shares of requests
      load:
        rates: [2, 8]                                  # requests/s offered (Poisson) …
        # concurrency: {1: 0.2, 8: 0.5, 16: 0.3}       # … or the share of time at each level
        # trace: traffic/arrivals.jsonl                # … or logged arrival times
      slo:
        ttft_ms: {percentile: 99, target: 500}
        tpot_ms: {percentile: 90, target: 50}
      objective: slo_goodput                           # or cost_per_mtok (within the SLO)
      price: {gpu_hour_usd: 2.5, gpus_per_server: 1}

Every part is optional and defaults to the rest of the config (the workloads' `weight`, equal
temperature shares, the run's `load` / `concurrency` / `slo`, `economics`): `RunConfig.profile_
or_default` resolves them. Shares are normalised; every size a user can type is bounded. YAML 1.1
reads unquoted on/off/yes/no as booleans: `profile: off` (or false) means no profile, and an
objective written `off` is refused with one line. This module only states and checks the
profile; the analyses that decide at it read it.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from specbench.config.load import MAX_IN_FLIGHT, MAX_RATE, MAX_RATES, MAX_SLO_MS
from specbench.config.sections import StrictModel

MAX_SHARES = 64  # workloads or temperatures named in a mix
MAX_LEVELS = 64  # concurrency levels in a distribution
PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
# a steady-state open-loop batch of the profile's mix (`config.traffic_mix`) is recorded under this
# workload name (its `engine_metrics` line) with `mix: "profile"`; no workload may take it
MIX_WORKLOAD = "mix"
PROFILE_MIX = "profile"
Objective = Literal["slo_goodput", "cost_per_mtok"]


def _off_to_none(v: Any) -> Any:
    """`off` / `false` (YAML booleans) switch an optional part off; `on` / `true` says nothing."""
    if v is False:
        return None
    if v is True:
        raise ValueError("give its settings (a mapping), or off to leave it out, not on/true")
    return v


def _number(t: Any) -> Any:
    """A temperature key written as text ("0.7") read as the number it names."""
    if isinstance(t, str):
        try:
            return float(t)
        except ValueError:
            return t
    return t


def _shares(v: dict[Any, float]) -> dict[Any, float]:
    """Non-negative finite shares, at least one positive, normalised to sum 1."""
    if not v:
        raise ValueError("needs at least one entry")
    if len(v) > MAX_SHARES:
        raise ValueError(f"takes at most {MAX_SHARES} entries")
    for k, x in v.items():
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise ValueError(f"the share of {k} must be a number, got {x!r}")
        if not math.isfinite(x) or x < 0:
            raise ValueError(f"the share of {k} must be finite and >= 0, got {x}")
    total = float(sum(v.values()))
    if total <= 0:
        raise ValueError("at least one share must be > 0")
    return {k: float(x) / total for k, x in v.items()}


class TrafficMix(StrictModel):
    """What the server sees: each workload's share of output tokens and each temperature's
    share of requests (None: the workloads' `weight`, equal shares of `sampling.temperatures`)."""

    workloads: dict[str, float] | None = None
    temperatures: dict[float, float] | None = None

    @field_validator("workloads")
    @classmethod
    def _workloads(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        return None if v is None else _shares(v)

    @field_validator("temperatures", mode="before")
    @classmethod
    def _temps_keys(cls, v: Any) -> Any:
        if isinstance(v, dict):
            # a stored config.yaml (written from the model as JSON) has the keys as strings
            v = {_number(t): x for t, x in v.items()}
            for t in v:
                if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t <= 100:
                    raise ValueError(f"{t!r} is not a temperature in [0, 100]")
        return v

    @field_validator("temperatures")
    @classmethod
    def _temps(cls, v: dict[float, float] | None) -> dict[float, float] | None:
        return None if v is None else _shares(v)


class ProfileLoad(StrictModel):
    """The load the server carries, one of: offered request rates (Poisson arrivals), a
    distribution of the number of requests in flight (share of time at each level), or a trace
    of logged arrival times (JSONL, as `load.trace`). None of them: the run's own `load` and
    `concurrency`."""

    rates: list[float] | None = None
    concurrency: dict[int, float] | None = None
    trace: str | None = None

    @field_validator("rates")
    @classmethod
    def _rates(cls, v: list[float] | None) -> list[float] | None:
        if v is None:
            return None
        if not v or len(v) > MAX_RATES:
            raise ValueError(f"takes 1 to {MAX_RATES} rates")
        if any(not 0.0 < r <= MAX_RATE for r in v):
            raise ValueError(f"each rate must be in (0, {MAX_RATE:g}] requests per second")
        return sorted(set(v))

    @field_validator("concurrency", mode="before")
    @classmethod
    def _levels(cls, v: Any) -> Any:
        if isinstance(v, dict):
            if len(v) > MAX_LEVELS:
                raise ValueError(f"takes at most {MAX_LEVELS} levels")
            for c in v:
                if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= MAX_IN_FLIGHT:
                    raise ValueError(f"{c!r} is not a concurrency in [1, {MAX_IN_FLIGHT}]")
        return v

    @field_validator("concurrency")
    @classmethod
    def _dist(cls, v: dict[int, float] | None) -> dict[int, float] | None:
        return None if v is None else _shares(v)

    @model_validator(mode="after")
    def _one(self) -> ProfileLoad:
        given = [k for k in ("rates", "concurrency", "trace") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of rates, concurrency, trace, not {' and '.join(given)}")
        return self


class PercentileTarget(StrictModel):
    """A latency objective: the `percentile`-th percentile of the requests at most `target` ms."""

    percentile: float = 99.0
    target: float = Field(gt=0.0, le=MAX_SLO_MS, allow_inf_nan=False)

    @field_validator("percentile")
    @classmethod
    def _pct(cls, v: float) -> float:
        if v not in PERCENTILES:
            raise ValueError(
                f"percentile must be one of {', '.join(f'{p:g}' for p in PERCENTILES)}, got {v:g}"
            )
        return v


class ProfileSlo(StrictModel):
    """Percentile targets (None: not an objective). A request counts towards SLO goodput when it
    meets the per-request limits (`slo`); the profile's targets are on the percentiles."""

    ttft_ms: PercentileTarget | None = None
    tpot_ms: PercentileTarget | None = None
    e2e_ms: PercentileTarget | None = None

    @field_validator("ttft_ms", "tpot_ms", "e2e_ms", mode="before")
    @classmethod
    def _off(cls, v: Any) -> Any:
        if isinstance(v, int | float) and not isinstance(v, bool):
            return {"target": v}  # a bare number: the target at the default percentile (p99)
        return _off_to_none(v)

    @property
    def any(self) -> bool:
        return any(x is not None for x in (self.ttft_ms, self.tpot_ms, self.e2e_ms))


class ProfilePrice(StrictModel):
    """A server's price (None: `economics.gpu_hour_usd`) and its GPUs (None: `economics.gpus`)."""

    gpu_hour_usd: float | None = Field(default=None, gt=0.0, le=1e6, allow_inf_nan=False)
    gpus_per_server: int | None = Field(default=None, ge=1, le=100_000)


class DeploymentProfile(StrictModel):
    """Where the decision is to hold (module docstring)."""

    traffic: TrafficMix = Field(default_factory=TrafficMix)
    load: ProfileLoad = Field(default_factory=ProfileLoad)
    slo: ProfileSlo = Field(default_factory=ProfileSlo)
    objective: Objective = "slo_goodput"
    price: ProfilePrice = Field(default_factory=ProfilePrice)

    @field_validator("traffic", "load", "slo", "price", mode="before")
    @classmethod
    def _parts_off(cls, v: Any) -> Any:
        v = _off_to_none(v)
        return {} if v is None else v

    @field_validator("objective", mode="before")
    @classmethod
    def _objective(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("write slo_goodput or cost_per_mtok (YAML read on/off as a boolean)")
        return v
