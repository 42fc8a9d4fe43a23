"""accept.json, typed: what `specbench accept` measured and planned, as one pydantic document.

`analysis.rollout.document.accept_results` builds it from the analysis results; `report/accept/accept.py`
renders it and writes it (`model_dump(mode="json", by_alias=True)`); `AcceptResults.read(path)`
reads a written file back. `accept_json_schema()` is the JSON Schema shipped as
docs/schema/accept.schema.json (`analysis.documents.schemas`); regenerate it after changing a model here
with `specbench schema --out docs/schema` (tests/unit/test_schemas.py fails while it is stale).

Schema history: 1, the first version (`schema` in the file).

Measured floats keep full precision in the model and are written rounded to 6 decimals, with
NaN / ±inf written as null (read back as NaN), so the renderers read exact values and the file
stays strict JSON. Every interval is `{"value", "ci95": [lo, hi]}`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, PlainSerializer

SCHEMA = 1
DECIMALS = 6  # measured floats in the file


def _written(x: float) -> float | None:
    return round(float(x), DECIMALS) if math.isfinite(x) else None


def _nan_for_null(v: Any) -> Any:
    return math.nan if v is None else v


# A measured number: NaN when undefined; written rounded, or null when not finite.
Measured = Annotated[
    float,
    BeforeValidator(_nan_for_null),
    PlainSerializer(_written, return_type=float | None),
]


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Interval(_Doc):
    """A point estimate with its 95 % interval (NaN ends: no interval, e.g. one request)."""

    value: Measured
    ci95: tuple[Measured, Measured]


class Pair(_Doc):
    target: str | None
    draft: str | None
    device: str | None
    dtype: str | None
    # the target's and draft's tokenizer fingerprints (models/fingerprint.py)
    tokenizers: dict[str, str | None] | None = None


class SkippedRow(_Doc):
    """A malformed row of the logged data, skipped with --skip-bad-rows."""

    row: str
    reason: str
    bucket: str


class Data(_Doc):
    source: str
    bucket_by: str | None
    requests: int
    positions: int
    """Scored response positions over every request."""
    skipped_rows: list[SkippedRow]


class SamplingSetting(_Doc):
    """A sampling setting the β are scored under (from the command line or the config)."""

    label: str
    temperature: float
    top_p: float
    top_k: int


class LoggedSetting(_Doc):
    """Each request's own logged sampling parameters."""

    label: Literal["logged"]
    requests: int
    """Requests that carry sampling parameters."""


class Options(_Doc):
    max_context: int | None
    overflow: str
    chat_template: str
    gamma_max: int
    margin: float
    ci_level: float
    bootstrap: int
    target_halfwidth: float
    position_edges: list[int]


class Timing(_Doc):
    """The time model a plan prices rounds with: round(γ) = γ·T_d + verify_base + slope·γ."""

    source: Literal["flags", "run", "measured", "default"]
    provisional: bool
    """No measured timing: the draft cost is assumed."""
    detail: str | None
    units: Literal["ms", "t_target"]
    """"t_target": times in units of T_ar (only a cost ratio is known)."""
    t_target_ms: Measured
    t_draft_ms: Measured
    verify_base_ms: Measured
    verify_slope_ms: Measured
    cost_ratio: Measured


class GammaRow(_Doc):
    gamma: int
    expected_tokens: Interval
    speedup: Interval
    itl_ms: Interval


class Itl(_Doc):
    baseline: Measured
    speculative: Interval


class BreakEvenCost(_Doc):
    """The largest T_d / T_ar at which speculation still pays, at the γ that tolerates the most."""

    gamma: int
    value: Measured
    ci95: tuple[Measured, Measured]


class Plan(_Doc):
    """The rollout plan of one bucket × setting (docs/theory.md §3–4, §8)."""

    verdict: Literal["on", "off", "undecided"]
    provisional: bool
    gamma: int
    """γ to deploy; 0 = off."""
    best_gamma: int
    """The speedup-maximising γ (0 when none beats plain decoding)."""
    speedup: Interval
    expected_tokens: Interval | None
    itl_ms: Itl
    break_even_alpha: Measured
    break_even_cost_ratio: BreakEvenCost | None
    reason: str
    gammas: list[GammaRow]
    detectable_speedup: float | None = None
    """The speedup the verdict detects with 80 % power (None: unbounded; docs/theory.md §8)."""
    requests_needed: int | None = None
    """UNDECIDED: about how many requests would settle it (None: not within 10,000)."""


class ProfileBin(_Doc):
    positions: tuple[int, int]
    """Response positions [start, stop)."""
    alpha: Interval
    tokens: int
    requests: int


class BucketSetting(_Doc):
    setting: str
    alpha: Interval
    tokens: int
    requests: int
    requests_needed: int | None
    """Requests for the target CI half-width; null when it is already met."""
    profile: list[ProfileBin]
    drift: Interval | None
    """α(last well-filled bin) − α(first bin)."""
    drift_positions: list[tuple[int, int]] | None
    plan: Plan


class Bucket(_Doc):
    bucket: str
    requests: int
    tokens: int
    greedy_agreement: Interval
    target_nll_per_token: Measured
    """Mean −log p_target(response token) at T = 1, nats per token."""
    timing: Timing
    settings: list[BucketSetting]
    warnings: list[str]


class AcceptResults(_Doc):
    """accept.json, written by `specbench accept --report` (and printed by `--json`): α per bucket
    × sampling setting from teacher-forced β over logged requests, and the rollout plan (γ,
    predicted speedup, ON/OFF verdict) it implies."""

    model_config = ConfigDict(populate_by_name=True)

    schema_version: int = Field(default=SCHEMA, alias="schema")
    kind: Literal["accept"] = "accept"
    estimator: str
    pair: Pair
    data: Data
    settings: list[SamplingSetting | LoggedSetting]
    options: Options
    timing: Timing
    """The overall bucket's timing."""
    provisional: bool
    """Some verdict rests on an assumed draft cost."""
    measured_timing: dict[str, Any] | None
    """Forward latencies measured here (--measure-timing)."""
    buckets: list[Bucket]
    overall: Bucket
    """Every request as one bucket."""
    warnings: list[str]

    @property
    def labels(self) -> list[str]:
        """The sampling settings' labels, in the order of every per-setting list."""
        return [s.label for s in self.settings]

    def to_json(self) -> dict[str, JsonValue]:
        """The document as written to accept.json."""
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def read(cls, path: Path) -> AcceptResults:
        return cls.model_validate_json(path.read_text(encoding="utf-8"))


def accept_json_schema() -> dict[str, JsonValue]:
    """The JSON Schema of accept.json as written (docs/schema/accept.schema.json)."""
    return AcceptResults.model_json_schema(by_alias=True, mode="serialization")
