"""The time model a rollout plan prices rounds with, and where its numbers come from: command-line
flags, a cost ratio alone, forwards measured here, or a finished run's results.json
(docs/theory.md §3–4). The costs themselves are `analysis.arithmetic.timing_model.TimingModel`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict

from specbench.analysis.arithmetic.timing_model import TimingModel, linear_fit
from specbench.analysis.documents.results_read import TimingSource, TimingWorkload
from specbench.errors import SpecbenchError


@dataclass(frozen=True)
class TimeModel:
    """round(γ) = γ·T_d + verify_base + slope·γ against plain decoding at T_ar per token.

    `units` is "ms", or "t_target" when only a cost ratio is known (then T_ar = 1).
    """

    t_target_ms: float
    t_draft_ms: float
    verify_base_ms: float
    verify_slope_ms: float
    units: str
    source: str  # "flags" | "run" | "measured" | "default"
    detail: str = ""

    @property
    def cost_ratio(self) -> float:
        return self.t_draft_ms / self.t_target_ms

    @property
    def provisional(self) -> bool:
        """No measured timing: the draft cost is an assumed ratio (the default or --cost-ratio),
        so verdicts built on it are provisional (α and ā(γ) are not: they need no timing)."""
        return self.source == "default" or self.units != "ms"

    @property
    def timing(self) -> TimingModel:
        """The same costs as the one timing model (`analysis.arithmetic.timing_model`)."""
        return TimingModel(
            self.t_target_ms, self.t_draft_ms, self.verify_base_ms, self.verify_slope_ms
        )


def time_model_from_flags(t_target_ms: float, t_draft_ms: float, slope_ms: float) -> TimeModel:
    """--t-target/--t-draft/--verify-slope: the verify at γ costs T_ar + slope·γ."""
    return TimeModel(t_target_ms, t_draft_ms, t_target_ms, slope_ms, "ms", "flags")


def time_model_relative(cost_ratio: float, slope: float, source: str) -> TimeModel:
    """Times in units of T_ar: T_d = c, verify = 1 + slope·γ."""
    return TimeModel(1.0, cost_ratio, 1.0, slope, "t_target", source)


class ForwardLatency(BaseModel):
    """`decoding.timing.measure_forward_latency`'s medians (ms), validated where the harness
    measures them; accept.json keeps them as `measured_timing` (`model_dump()`, these fields)."""

    model_config = ConfigDict(frozen=True)

    t_target_ms: float  # one target decode step, T_ar
    t_draft_ms: float  # one draft decode step, T_d
    verify_ms: dict[int, float]  # drafted k → one target verify over k + 1 tokens, T_t(k)
    context_len: int
    reps: int
    device: str


def time_model_from_measurement(measured: ForwardLatency) -> TimeModel:
    """Forwards measured here; T_t(k) = t0 + t1·k fitted over k."""
    ks = np.asarray(sorted(measured.verify_ms), float)
    ts = np.asarray([measured.verify_ms[int(k)] for k in ks], float)
    t0, t1, _ = linear_fit(ks, ts)
    return TimeModel(
        measured.t_target_ms,
        measured.t_draft_ms,
        t0,
        max(t1, 0.0),
        "ms",
        "measured",
        f"batch-1 forwards on {measured.device}, context {measured.context_len} "
        "tokens; harness overhead not included",
    )


def _results_timing_row(e: TimingWorkload) -> tuple[str, list[float]] | None:
    """(kind, [T_ar, T_d, verify_base, slope]) of one results.json entry, or None when it has no
    complete timing. specbench's own engine splits the round into draft steps and a verify fit;
    an engine backend (vLLM, a served endpoint) only sees whole rounds, fitted as r0 + r1·γ
    (`timing.engine_round_fit`), which is the same model with T_d = 0 (analysis.pipeline.serving_results)."""
    t, t_ar = e.timing, e.baseline_step_ms
    if t is None or t_ar is None:
        return None
    draft, verify, over = t.t_draft_ms, t.verify_fit, t.overhead_fit
    if (
        draft is not None
        and draft.mean is not None
        and verify is not None
        and verify.t0_ms is not None
        and verify.t1_ms_per_token is not None
    ):
        o0 = (over.o0_ms if over else None) or 0.0
        o1 = (over.o1_ms_per_token if over else None) or 0.0
        return "run", [t_ar, draft.mean, verify.t0_ms + o0, verify.t1_ms_per_token + o1]
    fit = t.engine_round_fit
    r0, r1 = (fit.r0_ms, fit.r1_ms_per_token) if fit is not None else (None, None)
    if r0 is not None and r1 is not None and all(map(math.isfinite, (t_ar, r0, r1))):
        return "engine", [t_ar, 0.0, r0, r1]
    return None


def time_model_from_results(results: TimingSource, bucket: str | None, source: str) -> TimeModel:
    """Mean timing of a run's results.json entries (those of workload `bucket` when it has any).
    specbench's engine: T_ar = baseline_step_ms, T_d = t_draft_ms.mean, verify_base = t0 + o0,
    slope = t1 + o1. An engine backend's run: T_ar = baseline_step_ms, T_d = 0 and the whole
    round r0 + r1·γ as the verify (`timing.engine_round_fit`)."""
    entries = results.workloads
    mine = [e for e in entries if e.workload == bucket] or entries
    found = [r for r in (_results_timing_row(e) for e in mine) if r is not None]
    if not found:
        raise SpecbenchError(
            f"{source} has no workload with complete timing (baseline_step_ms with "
            "timing.t_draft_ms and timing.verify_fit, or timing.engine_round_fit); pass the "
            "results.json of a finished `specbench run`"
        )
    kinds = {k for k, _ in found}
    rows = [r for k, r in found if k == ("run" if "run" in kinds else "engine")]
    t_ar, t_d, base, slope = np.asarray(rows).mean(axis=0)
    which = f"workload {bucket}" if mine is not entries else f"mean of {len(rows)} entries"
    fit = "" if "run" in kinds else "; engine round fit r0 + r1·γ"
    return TimeModel(
        float(t_ar),
        float(t_d),
        float(base),
        float(max(slope, 0.0)),
        "ms",
        "run",
        f"{source} ({which}{fit})",
    )
