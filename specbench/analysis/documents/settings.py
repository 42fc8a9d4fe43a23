"""The settings an analysis reads from a run's stored config, typed and read once.

A stored config.yaml is a dumped `config.RunConfig`, but `report` also reads run directories
written by older versions and tests' synthetic configs, which hold only some keys: every key here
is optional and falls back to the typed config's own default (`config.DecisionSpec`, whose
defaults are `specbench.defaults`), so no default is restated in the analysis.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from specbench.config import DecisionSpec

_DECISION = DecisionSpec()  # the defaults of `decision:`


class _Decision(BaseModel):
    """`decision:` as stored; checked on reading by `harness.run.rundir.read_stored_config`."""

    model_config = ConfigDict(extra="allow")
    margin: float = _DECISION.margin
    ci_level: float = _DECISION.ci_level
    bootstrap: int = _DECISION.bootstrap
    target_ci_halfwidth: float = _DECISION.target_ci_halfwidth


@dataclass(frozen=True)
class AnalysisSettings:
    """What `build_results` needs from the config: the decision settings, each workload's
    traffic weight and rank, and the primary drafter's label (whose fixed-γ runs the γ table
    and the predictions are built from)."""

    margin: float = _DECISION.margin  # ON only if the speedup's lower bound exceeds 1 + margin
    ci_level: float = _DECISION.ci_level
    n_boot: int = _DECISION.bootstrap
    target_halfwidth: float = _DECISION.target_ci_halfwidth  # α CI half-width ("too few prompts")
    weights: Mapping[str, float] = field(default_factory=dict)
    order: Mapping[str, int] = field(default_factory=dict)
    primary_drafter: str = "model"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AnalysisSettings:
        decision = _Decision.model_validate(config.get("decision", {}))
        workloads = config.get("workloads", [])
        draft = config.get("draft", {})
        return cls(
            margin=float(decision.margin),
            ci_level=float(decision.ci_level),
            n_boot=int(decision.bootstrap),
            target_halfwidth=float(decision.target_ci_halfwidth),
            weights={w["name"]: float(w.get("weight", 1.0)) for w in workloads},
            order={w["name"]: i for i, w in enumerate(workloads)},
            primary_drafter=draft.get("name") or draft.get("method", "model"),
        )

    def weight(self, workload: str) -> float:
        return self.weights.get(workload, 1.0)

    def rank(self, workload: str) -> int:
        """Position of the workload in the config (results list workloads in config order)."""
        return self.order.get(workload, 99)
