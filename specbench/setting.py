"""What a run measures, one setting at a time, for every backend: the baseline (γ = 0) or a
drafter under a γ policy — specbench's own drafters (a draft model, n-gram lookup) on the
transformers backend, a method × endpoint (or a γ schedule) on a serving engine.

One type (`Setting`) from the plan to the records: the harness runs it, a record stores its
`drafter`, `policy` and `gamma`, and the analysis groups records by that triple, the setting's
`key` (`SettingKey`; docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.config import PolicySpec
from specbench.records import UnitKey

# a setting as the records name it: (drafter, policy, γ); the baseline's is ("", "", 0)
SettingKey = tuple[str, str, int]


@dataclass(frozen=True)
class Setting:
    """One setting. `drafter` is what the records call its drafter: the drafter's label on the
    transformers backend, the engine setting's label (method, endpoint or "schedule") on a
    serving engine; "" for the baseline."""

    gamma: int  # 0 = the baseline (no speculation); a γ schedule's largest k
    drafter: str = ""
    policy: PolicySpec | None = None  # transformers: a γ policy; None = fixed γ
    endpoint: str = ""  # openai: the server URL measured for this setting
    # vllm: γ by batch size ((lo, hi, k), …), drafter "schedule", gamma = the largest k
    schedule: tuple[tuple[int, int, int], ...] | None = None
    method: str = ""  # engines: draft_model, eagle3, ngram, mtp, …; "" = not stated

    @property
    def policy_name(self) -> str:
        """The records' `policy`: "" for the baseline, "schedule" for an engine's γ schedule,
        the γ policy's name, or "fixed"."""
        if self.gamma == 0:
            return ""
        if self.schedule is not None:
            return "schedule"
        return self.policy.name if self.policy is not None else "fixed"

    @property
    def key(self) -> SettingKey:
        return (self.drafter, self.policy_name, self.gamma)

    def unit_key(self, workload: str, temp: float, prompt_id: str, repeat: int) -> UnitKey:
        """The record key of this setting's unit for one prompt (`records.UnitKey`)."""
        kind = "baseline" if self.gamma == 0 else "spec"
        return UnitKey(
            kind, workload, temp, self.gamma, self.drafter, self.policy_name, prompt_id, repeat
        )

    @property
    def label(self) -> str:
        """What records (`setting`), progress and messages call it: "baseline", or
        "<drafter> [<policy>] γ=<γ>" (a drafter label that already names its γ as is)."""
        if self.gamma == 0:
            return "baseline"
        if "γ=" in self.drafter:
            return self.drafter
        pol = "" if self.policy is None else f" {self.policy.name}"
        return f"{self.drafter}{pol} γ={self.gamma}" if self.drafter else f"γ={self.gamma}"
