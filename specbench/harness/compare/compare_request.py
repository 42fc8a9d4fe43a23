"""`specbench compare` as one typed request: its options checked together, and the one function
that compares two runs (or two sets of runs).

    request = CompareRequest(runs=[...], ...)   # SpecbenchError (exit 2) on a refused combination
    request.mode                                 # "plan", "calibrate" or "compare"
    result = compare_runs(request)               # an A/B job first with --ab, then the comparison

--plan and --calibrate write thresholds, not a comparison: the command hands them to
cli/check/compare_gate.py. The fields are the command's options under the same names, without defaults
(the command's options state them once, and `--help` shows them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.analysis.compare.verdict import Comparison


@dataclass(frozen=True, kw_only=True)
class CompareRequest:
    """What `specbench compare` was asked: the runs, the thresholds (file < flags), how to gate,
    and the --plan, --calibrate and --ab modes' settings."""

    runs: list[Path]
    # the thresholds: the file, then the flags over it
    thresholds: Path | None
    significance: float | None
    alpha_drop: float | None
    accepted_length_drop: float | None
    speedup_drop: float | None
    latency_rise: float | None
    throughput_drop: float | None
    gate: str | None
    # how the comparison gates
    force: bool
    gate_unstable_timing: bool
    strict: bool
    subject: Literal["code", "env"]
    allow_inconclusive: bool
    # --calibrate and --plan
    calibrate: bool
    plan: bool
    max_prompts: int | None
    gpu_hour_usd: float | None
    run_overhead_s: float
    write_plan: bool
    # --ab: run both sides here first
    ab: bool
    base_python: Path | None
    candidate_python: Path | None
    candidate_config: Path | None
    pairs: int
    interleave: str
    ab_out: Path
    run_args: str

    def __post_init__(self) -> None:
        """The combinations of modes and runs that mean nothing: one line each."""
        if self.calibrate and self.plan:
            raise SpecbenchError("give --calibrate (with A/A runs) or --plan, not both")
        if self.plan and self.runs:
            raise SpecbenchError("--plan reads only the --thresholds file; give no runs")
        if self.mode == "compare" and not self.runs:
            raise SpecbenchError("give BASE NEW, BASE… vs NEW…, --calibrate RUNS, or --plan")
        if self.mode == "compare" and self.ab and len(self.runs) != 1:
            raise SpecbenchError("--ab takes one CONFIG (both sides run it)")

    @property
    def mode(self) -> Literal["plan", "calibrate", "compare"]:
        return "plan" if self.plan else "calibrate" if self.calibrate else "compare"

    def threshold_flags(self) -> dict[str, Any]:
        """The flags that override the thresholds file (None: not given)."""
        return {
            "significance": self.significance,
            "alpha_drop": self.alpha_drop,
            "accepted_length_drop": self.accepted_length_drop,
            "speedup_drop": self.speedup_drop,
            "latency_rise": self.latency_rise,
            "throughput_drop": self.throughput_drop,
            "gate": self.gate,
        }


def compare_runs(request: CompareRequest) -> Comparison:
    """With --ab, run both sides here first (harness/compare/ab.py); then read both sides, refuse
    incomparable runs unless --force, and compare them (analysis/compare/verdict.py)."""
    from specbench.analysis.compare.environment import identity_differences
    from specbench.analysis.compare.verdict import compare as compare_sides
    from specbench.harness.compare.compare_inputs import load_many, load_thresholds, split_sides

    runs, force = list(request.runs), request.force
    if request.ab:
        import shlex
        import sys

        from specbench.harness.compare.ab import run_ab

        interpreter = Path(sys.executable)
        base_dirs, new_dirs = run_ab(
            runs[0],
            request.base_python or interpreter,
            request.candidate_python or interpreter,
            request.pairs,
            request.ab_out,
            shlex.split(request.run_args),
            candidate_config=request.candidate_config,
            interleave=request.interleave,
        )
        runs = [*base_dirs, Path("vs"), *new_dirs]
        # two configs differ on purpose (a revision, an endpoint): compared as forced, shown
        force = force or request.candidate_config is not None

    th = load_thresholds(request.thresholds, request.threshold_flags())
    base_paths, new_paths = split_sides(runs)
    b_side, n_side = load_many(base_paths, "base"), load_many(new_paths, "new")
    diffs = identity_differences(b_side, n_side)
    if diffs and not force:
        what = "; ".join(f"{d.field}: {d.base} vs {d.new}" for d in diffs)
        raise SpecbenchError(
            f"the runs are not comparable ({what}); pass --force to compare anyway"
        )
    result = compare_sides(
        b_side,
        n_side,
        th,
        forced=diffs,
        gate_unstable_timing=request.gate_unstable_timing,
        strict=request.strict,
        subject=request.subject,
        allow_inconclusive=request.allow_inconclusive,
    )
    if not result.rows:
        raise SpecbenchError(
            "the runs share no workload × temperature; nothing to compare "
            f"(base has {sorted(b_side.groups)}, new has {sorted(n_side.groups)})"
        )
    return result
