"""`specbench accept` as one typed request: every option of the command, checked together, and the
one function that runs it.

    request = AcceptRequest(data=..., config=..., ...)   # raises SpecbenchError (exit 2) on a
    result = measure_accept(request, events)             # combination no option range can say

The fields are the command's options under the same names, without defaults: the command's
options are the one place a default is stated (and `--help` shows it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from specbench import defaults
from specbench.analysis.arithmetic.roi_request import check_timing_pair
from specbench.errors import SpecbenchError

if TYPE_CHECKING:  # the pipeline (torch) is imported only when a request runs
    from specbench.analysis.rollout import AcceptResult
    from specbench.harness.accept.accept import AcceptEvents


def check(ok: bool, message: str) -> None:
    """One line and exit code 2 (SpecbenchError) when a combination of options is refused."""
    if not ok:
        raise SpecbenchError(message)


@dataclass(frozen=True, kw_only=True)
class AcceptRequest:
    """What `specbench accept` was asked: the logged data, the pair, the sampling grid, the
    scoring sizes, where the timing comes from and the decision settings."""

    # the logged requests
    data: str
    prompt_field: str | None
    messages_field: str | None
    response_field: str
    id_field: str
    bucket_by: str | None
    buckets: list[str] | None
    max_requests: int | None
    temperature_field: str
    top_p_field: str
    split: str
    skip_bad_rows: bool
    seed: int | None
    # the pair
    config: Path | None
    target: str | None
    draft: str | None
    device: str | None
    dtype: Literal["auto", "float32", "float16", "bfloat16"] | None
    # the sampling grid
    temperature: list[float] | None
    top_p: list[float] | None
    top_k: int | None
    logged_params: bool
    chat_template: Literal["auto", "on", "off"] | None
    # scoring
    max_context: int | None
    overflow: Literal["window", "truncate"]
    batch_tokens: int | None
    chunk_tokens: int
    position_bin: int
    # timing: at most one source
    timings: Path | None
    force: bool
    t_target: float | None
    t_draft: float | None
    verify_slope: float
    cost_ratio: float | None
    measure_timing: bool
    timing_reps: int
    # the decision
    gamma_max: int
    margin: float | None
    target_halfwidth: float

    def __post_init__(self) -> None:
        """What the ranges on the options cannot say: one line naming the option."""
        n_sources = sum(
            [
                self.timings is not None,
                self.t_target is not None or self.t_draft is not None,
                self.cost_ratio is not None,
                self.measure_timing,
            ]
        )
        check(
            n_sources <= 1,
            "give one timing source: --timings, --t-target/--t-draft, --cost-ratio or "
            "--measure-timing",
        )
        check_timing_pair(self.t_target, self.t_draft)
        for name, value in (
            ("--t-target", self.t_target),
            ("--t-draft", self.t_draft),
            ("--cost-ratio", self.cost_ratio),
        ):
            check(value is None or value > 0, f"{name} must be > 0, got {value}")
        check(
            0 < self.target_halfwidth < 1,
            f"--target-halfwidth must be in (0, 1), got {self.target_halfwidth:g}",
        )
        for p in self.top_p or []:
            check(0 < p <= 1, f"--top-p must be in (0, 1], got {p:g}")
        check(
            not (self.prompt_field is not None and self.messages_field is not None),
            "give --prompt-field or --messages-field, not both",
        )


def measure_accept(request: AcceptRequest, events: AcceptEvents | None = None) -> AcceptResult:
    """The pair from --config and/or the flags, the options over the config over the defaults,
    then the pipeline (harness/accept/accept.py's `run_accept`)."""
    from specbench.data.logged_rows import FieldNames
    from specbench.harness.accept.accept import AcceptData, TimingFlags, run_accept
    from specbench.harness.accept.accept_config import accept_options, model_specs

    r = request
    t_spec, d_spec, cfg = model_specs(r.config, r.target, r.draft, r.device, r.dtype)
    opts = accept_options(
        cfg,
        d_spec,
        temperatures=r.temperature,
        top_ps=r.top_p,
        top_k=r.top_k,
        chat_template=r.chat_template,
        margin=r.margin,
        seed=r.seed,
        logged_params=r.logged_params,
        max_context=r.max_context,
        overflow=r.overflow,
        batch_tokens=r.batch_tokens,
        chunk_tokens=r.chunk_tokens,
        position_bin=r.position_bin,
        target_halfwidth=r.target_halfwidth,
        gamma_max=r.gamma_max,
        skip_bad_rows=r.skip_bad_rows,
    )
    fields = FieldNames(
        prompt=r.prompt_field or "prompt",
        messages=r.messages_field or "messages",
        response=r.response_field,
        bucket=r.bucket_by,
        id=r.id_field,
        temperature=r.temperature_field,
        top_p=r.top_p_field,
        prompt_explicit=r.prompt_field is not None,
        messages_explicit=r.messages_field is not None,
    )
    timing = TimingFlags(
        default_cost_ratio=defaults.COST_RATIO,
        timings=r.timings,
        t_target=r.t_target,
        t_draft=r.t_draft,
        verify_slope=r.verify_slope,
        cost_ratio=r.cost_ratio,
        measure=r.measure_timing,
        reps=r.timing_reps,
        force=r.force,
    )
    logged = AcceptData(r.data, fields, r.split, r.buckets, r.max_requests)
    return run_accept(logged, t_spec, d_spec, opts, timing, events)
