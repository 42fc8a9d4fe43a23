"""The configuration of `specbench canary` (docs/canary.md): one YAML file, these keys.

    alpha: 0.05            # family-wise error over every guard, bucket and look
    window_s: 60           # one paired window
    max_duration_h: 24     # then `on_timeout` if still undecided
    on_timeout: rollback
    traffic: {canary_share: 0.05, control_share: 0.05}
    guards: {tpot: {margin: 0.05, slo_ms: 60}, errors: {margin: 0.005}, ...}
    sources: {logs: {canary: c.jsonl, control: k.jsonl}}   # or metrics / prometheus
    state: canary-state.jsonl

Every size a user can type is bounded; secrets (a Prometheus bearer token) are read from the
environment variable named by `token_env`, never from the file.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_WINDOW_S = 86_400.0
MAX_DURATION_H = 24.0 * 90
MAX_BUCKETS = 256
MAX_URLS = 256


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LatencyGuard(_Section):
    """canary ÷ control of the per-window medians must stay below 1 + margin; the share of
    requests over `slo_ms` must not grow by more than `slo_margin` (absolute)."""

    margin: float = Field(default=0.05, gt=0, le=10)
    slo_ms: float | None = Field(default=None, gt=0, le=1e7)
    slo_margin: float = Field(default=0.02, gt=0, le=1)
    # --export-rules: alert when more than this share of requests is over the SLO (no control)
    alert_share: float = Field(default=0.05, gt=0, lt=1)


class ErrorGuard(_Section):
    margin: float = Field(default=0.005, gt=0, le=1)  # canary error share − control's, absolute


class AcceptanceGuard(_Section):
    """accepted / proposed of each bucket against a floor: `floor` when given, else the
    break-even α read from `accept_json` (docs/canary.md), else the rule-of-thumb floors."""

    floor: float | None = Field(default=None, gt=0, lt=1)
    accept_json: Path | None = None
    min_ratio: float = Field(default=0.4, gt=0, lt=1)  # rule of thumb: accepted / proposed
    min_length: float = Field(default=1.5, ge=1, le=65)  # rule of thumb: mean accepted length
    gamma: int | None = Field(default=None, ge=1, le=64)  # default: proposed / drafts as measured
    buckets: list[str] | None = Field(default=None, max_length=MAX_BUCKETS)
    max_buckets: int = Field(default=8, ge=1, le=MAX_BUCKETS)


class OutputGuard(_Section):
    """A speculative engine that is not lossless shifts what is generated: output length (log
    ratio of medians, either way), share cut by the length limit and degenerate share."""

    length_margin: float = Field(default=0.1, gt=0, le=10)
    finish_margin: float = Field(default=0.02, gt=0, le=1)
    degenerate_margin: float = Field(default=0.01, gt=0, le=1)


class Guards(_Section):
    tpot: LatencyGuard | None = Field(default_factory=lambda: LatencyGuard())
    e2e: LatencyGuard | None = Field(default_factory=lambda: LatencyGuard())
    errors: ErrorGuard | None = Field(default_factory=lambda: ErrorGuard())
    acceptance: AcceptanceGuard | None = Field(default_factory=lambda: AcceptanceGuard())
    output: OutputGuard | None = Field(default_factory=lambda: OutputGuard())


class Traffic(_Section):
    canary_share: float = Field(default=0.05, gt=0, lt=1)
    control_share: float = Field(default=0.05, gt=0, lt=1)
    tolerance: float = Field(default=0.05, gt=0, lt=0.5)  # of canary ÷ (canary + control)

    @property
    def expected(self) -> float:
        """The canary's expected share of the requests the two arms serve together."""
        return self.canary_share / (self.canary_share + self.control_share)


class LogFields(_Section):
    """Field paths (docs/accept.md's syntax: `response.usage.completion_tokens`) into a row."""

    time: str = "timestamp"  # Unix seconds or ISO-8601
    status: str = "status"  # "ok", an HTTP status code or "error"/"timeout"
    tpot_ms: str = "tpot_ms"
    e2e_ms: str = "e2e_ms"
    output_tokens: str = "output_tokens"
    finish_reason: str = "finish_reason"
    response: str = "response"  # text, for the degenerate-output check
    bucket: str | None = None
    accepted: str = "spec.accepted_tokens"
    proposed: str = "spec.draft_tokens"
    drafts: str = "spec.drafts"


class LogSource(_Section):
    canary: str
    control: str
    fields: LogFields = Field(default_factory=lambda: LogFields())


class MetricNames(_Section):
    """Metric names to read; vLLM's and SGLang's are built in (`engine`), others mapped here."""

    requests: str | None = None
    errors: list[str] | None = None
    tpot: str | None = None  # a histogram in seconds
    e2e: str | None = None
    output_tokens: str | None = None
    finish: str | None = None  # a counter with a finished_reason label
    accepted: str | None = None
    proposed: str | None = None
    drafts: str | None = None


class MetricsSource(_Section):
    engine: Literal["vllm", "sglang", "custom"] = "vllm"
    canary: list[str] = Field(min_length=1, max_length=MAX_URLS)
    control: list[str] = Field(min_length=1, max_length=MAX_URLS)
    names: MetricNames = Field(default_factory=lambda: MetricNames())


class PrometheusSource(_Section):
    url: str
    canary: str = Field(min_length=1, max_length=2000)  # a label matcher, e.g. job="canary"
    control: str = Field(min_length=1, max_length=2000)
    engine: Literal["vllm", "sglang", "custom"] = "vllm"
    names: MetricNames = Field(default_factory=lambda: MetricNames())
    token_env: str | None = None  # the environment variable holding a bearer token
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    lag_s: float = Field(default=15.0, ge=0, le=3600)  # a window is read this long after it ends


class Sources(_Section):
    logs: LogSource | None = None
    metrics: MetricsSource | None = None
    prometheus: PrometheusSource | None = None

    @model_validator(mode="after")
    def _one(self) -> Sources:
        given = [k for k in ("logs", "metrics", "prometheus") if getattr(self, k) is not None]
        if not given:
            raise ValueError("give sources.logs, sources.metrics or sources.prometheus")
        if len(given) > 1 and given != ["logs", "prometheus"]:
            raise ValueError(
                f"give one source, or logs and prometheus together, not {' and '.join(given)}: a "
                "direct scrape's windows are not aligned with the others'"
            )
        return self


class CanaryConfig(_Section):
    name: str = Field(default="canary", max_length=200)
    alpha: float = Field(default=0.05, gt=0, le=0.5)
    window_s: float = Field(default=60.0, ge=1, le=MAX_WINDOW_S)
    min_windows: int = Field(default=8, ge=2, le=10_000)
    n_opt: int = Field(default=120, ge=1, le=1_000_000)  # windows the sequences are tightest near
    max_duration_h: float = Field(default=24.0, gt=0, le=MAX_DURATION_H)
    on_timeout: Literal["rollback", "promote"] = "rollback"
    traffic: Traffic = Field(default_factory=lambda: Traffic())
    guards: Guards = Field(default_factory=lambda: Guards())
    sources: Sources
    state: Path = Path("canary-state.jsonl")
    # when the canary began (Unix seconds or ISO-8601): where a Prometheus source starts reading
    start: datetime | None = None


def load_canary_config(path: Path) -> CanaryConfig:
    """The canary config at `path`; relative paths in it (state, accept_json, local logs) are
    relative to the file's folder. A bad file is one line naming the key to change."""
    from pydantic import ValidationError

    from specbench.config.loader import format_validation_error, read_yaml
    from specbench.data.sources import is_url
    from specbench.errors import SpecbenchError

    if not path.is_file():
        raise SpecbenchError(f"config not found: {path}")
    data = read_yaml(path)
    try:
        cfg = CanaryConfig.model_validate(data)
    except ValidationError as exc:
        raise SpecbenchError(format_validation_error(exc, str(path))) from None
    base = path.parent

    def rel(p: Path) -> Path:
        return p if p.is_absolute() else base / p

    cfg.state = rel(cfg.state.expanduser())
    a = cfg.guards.acceptance
    if a is not None and a.accept_json is not None:
        a.accept_json = rel(a.accept_json.expanduser())
    logs = cfg.sources.logs
    if logs is not None:
        for arm in ("canary", "control"):
            loc = getattr(logs, arm)
            if not is_url(loc):
                setattr(logs, arm, str(rel(Path(loc).expanduser())))
    return cfg
