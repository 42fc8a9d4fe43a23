"""`specbench roi` as one typed request: the acceptance and timing it is given, checked together,
and the one function that evaluates the speculation model (roi.py) on it.

    request = RoiRequest(alpha=[0.6], ...)   # SpecbenchError (exit 2) on a refused combination
    outcome = evaluate_roi(request)          # one scenario (and its economics) per α

The fields are the command's options under the same names, without defaults (the command's
options state them once, and `--help` shows them).
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench import defaults
from specbench.analysis.arithmetic import roi as model
from specbench.defaults import MAX_ROI_MS, MAX_ROI_RATIO
from specbench.errors import SpecbenchError


def check_timing_pair(t_target: float | None, t_draft: float | None) -> None:
    """--t-target and --t-draft (roi, accept) are one measurement: both or neither."""
    if (t_target is None) != (t_draft is None):
        raise SpecbenchError("--t-target and --t-draft go together: give both (in ms) or neither")


@dataclass(frozen=True, kw_only=True)
class RoiRequest:
    """What `specbench roi` was asked: α (or τ at a γ), the timing (absolute or a cost ratio), the
    γ grid and the economics."""

    alpha: list[float] | None
    accepted: float | None
    t_target: float | None
    t_draft: float | None
    cost_ratio: float | None
    verify_slope: float
    gamma_max: int
    gamma: int | None
    gpu_hour_usd: float | None
    gpus: int
    draft_memory_gib: float | None
    gpu_memory_gib: float | None

    def __post_init__(self) -> None:
        """What the ranges on the options cannot say: one line naming the option."""
        if self.alpha and self.accepted is not None:
            raise SpecbenchError("give either --alpha or --accepted, not both")
        if not self.alpha and self.accepted is None:
            raise SpecbenchError("give --alpha A (in [0, 1]) or --accepted TAU --gamma G")
        check_timing_pair(self.t_target, self.t_draft)
        if self.cost_ratio is not None and self.t_target is not None:
            raise SpecbenchError("give either --cost-ratio or --t-target/--t-draft, not both")
        for name, value in (("--t-target", self.t_target), ("--t-draft", self.t_draft)):
            if value is not None and not 0 < value <= MAX_ROI_MS:
                raise SpecbenchError(
                    f"{name} must be a time > 0 ms and at most {MAX_ROI_MS:g}, got {value:g}"
                )
        if self.cost_ratio is not None and not 0 < self.cost_ratio <= MAX_ROI_RATIO:
            raise SpecbenchError(
                f"--cost-ratio must be > 0 and at most {MAX_ROI_RATIO:g}, got {self.cost_ratio:g}"
            )
        for name, value in (
            ("--gpu-hour-usd", self.gpu_hour_usd),
            ("--draft-memory-gib", self.draft_memory_gib),
            ("--gpu-memory-gib", self.gpu_memory_gib),
        ):
            if value is not None and value <= 0:
                raise SpecbenchError(f"{name} must be > 0, got {value:g}")
        if self.relative and self.gpu_hour_usd is not None:
            raise SpecbenchError(
                "--gpu-hour-usd needs absolute timings: give --t-target and --t-draft in ms"
            )
        if self.accepted is not None:
            if self.gamma is None:
                raise SpecbenchError("--accepted needs --gamma G, the γ at which it was measured")
            if not 1.0 <= self.accepted <= self.gamma + 1:
                raise SpecbenchError(
                    f"--accepted must be in [1, {self.gamma + 1}] (1 to γ + 1) at --gamma "
                    f"{self.gamma}"
                )

    @property
    def relative(self) -> bool:
        """No absolute timing: times are in units of T_ar (T_d / T_ar the cost ratio)."""
        return self.t_target is None

    def times_ms(self) -> tuple[float, float]:
        """(T_ar, T_d): in ms, or in units of T_ar when relative."""
        if self.t_target is not None and self.t_draft is not None:
            return self.t_target, self.t_draft
        return 1.0, self.cost_ratio if self.cost_ratio is not None else defaults.COST_RATIO


@dataclass(frozen=True)
class RoiOutcome:
    """One scenario per α (or the one α solved from τ), its economics, and the assumption made
    when no timing was given."""

    scenarios: list[model.Scenario]
    economics: list[model.Economics]
    relative: bool
    note: str | None


def evaluate_roi(request: RoiRequest) -> RoiOutcome:
    """Each α over the γ grid (a single γ with --gamma alone), with its economics."""
    r = request
    t_target_ms, t_draft_ms = r.times_ms()
    if r.accepted is not None:
        assert r.gamma is not None  # checked by the request
        grid = list(range(1, r.gamma_max + 1))
        inputs: list[tuple[float, float | None]] = [
            (model.alpha_from_accepted(r.accepted, r.gamma), r.accepted)
        ]
    else:
        grid = [r.gamma] if r.gamma is not None else list(range(1, r.gamma_max + 1))
        inputs = [(a, None) for a in r.alpha or []]
    scenarios = [
        model.scenario(a, grid, t_target_ms, t_draft_ms, r.verify_slope, accepted=tau)
        for a, tau in inputs
    ]
    econ = [
        model.economics(
            t_target_ms,
            sc.best.itl_ms,
            r.gpu_hour_usd,
            r.gpus,
            r.draft_memory_gib,
            r.gpu_memory_gib,
        )
        for sc in scenarios
    ]
    note = (
        f"No timing given: assuming T_d / T_ar = {defaults.COST_RATIO} "
        "(times in units of T_ar); pass --t-target/--t-draft or --cost-ratio."
        if r.relative and r.cost_ratio is None
        else None
    )
    return RoiOutcome(scenarios, econ, r.relative, note)
