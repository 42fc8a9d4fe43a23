"""simulation.json's entries as pydantic models: what `analysis.simulate.simulation.simulate_run`
builds, per workload × temperature × drafter, written by `specbench simulate` and read by the
console table (`report.simulate.simulate`)."""

from __future__ import annotations

from specbench.analysis.documents.results_model_base import EstimateJSON, ResultsModel


class PolicyReplay(ResultsModel):
    """One γ policy replayed on the trace, beside a real run of it when the run has one."""

    policy: str
    gamma: int  # the policy's largest γ
    predicted_tokens_per_round: EstimateJSON | None
    predicted_speedup: EstimateJSON | None
    mean_gamma: float
    measured_tokens_per_round: EstimateJSON | None
    measured_speedup: EstimateJSON | None
    speedup_error: float | None = None  # replayed over measured speedup, minus 1


class Simulation(ResultsModel):
    """The policies replayed on one workload × temperature × drafter's largest fixed-γ trace."""

    workload: str
    temperature: float
    drafter: str
    trace_gamma: int
    policies: list[PolicyReplay]
    not_replayed: list[str]  # default policies drafting beyond the trace's γ
