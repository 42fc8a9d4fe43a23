"""What `specbench verify` found, as plain values (no torch): the greedy-identity check, the
sampled-distribution checks per context and the whole report with its multiple-testing verdict.

harness/verify/verify_checks.py produces them, harness/verify/verify.py assembles the report, report/verify/verify.py
renders it; the statistics are analysis/verify/lossless_tests.py (docs/verify.md, docs/theory.md §1, §10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from specbench.analysis.verify.lossless_tests import FitTest, PositionTest, bonferroni


@dataclass(frozen=True)
class GreedyMismatch:
    workload: str
    prompt_id: str
    gamma: int
    position: int  # first differing output position (0-based)
    baseline_token: int
    speculative_token: int
    logit_margin: float  # target logit of the baseline token minus that of the speculative token
    near_tie: bool


@dataclass(frozen=True)
class GreedyCheck:
    dtype: str
    gammas: list[int]
    prompts: int
    runs: int  # prompts × γ
    identical_runs: int
    tokens_compared: int  # baseline tokens over every run
    tokens_matching: int  # tokens before the first difference
    near_tie_tolerance: float
    mismatches: list[GreedyMismatch]
    drafter: str = "model"

    @property
    def identity_rate(self) -> float:
        return self.identical_runs / self.runs if self.runs else math.nan

    @property
    def token_identity_rate(self) -> float:
        return self.tokens_matching / self.tokens_compared if self.tokens_compared else math.nan

    @property
    def near_tie_flips(self) -> int:
        return sum(m.near_tie for m in self.mismatches)

    @property
    def passed(self) -> bool:
        return all(m.near_tie for m in self.mismatches)


@dataclass(frozen=True)
class ContextCheck:
    label: str
    workload: str
    context_tokens: int
    beta: float | None  # exact P(y_1 accepted) under the exact rule; None: noisy or n-gram draft
    p_max: float  # the target's top probability at the context
    accept_rate: float  # measured P(y_1 accepted)
    accept_expected: float | None  # β (exact rule) or the rule's closed form (lossy)
    first: FitTest  # first emitted token vs p(· | context)
    positions: list[PositionTest]  # emitted positions 2..γ+1 (γ+1: the bonus token)
    drafted: float  # mean tokens drafted per round (an n-gram drafter may find nothing)
    drift_tv_exact: float | None  # TV(rule's first-token distribution, p), closed form

    def p_values(self) -> list[float]:
        """This context's tests: position 1 (when not degenerate) and every tested later one."""
        out = [self.first.p_value] if self.first.dof >= 1 else []
        return out + [t.p_value for t in self.positions if t.tested]


@dataclass(frozen=True)
class SamplingCheck:
    temperature: float
    top_p: float
    top_k: int
    gamma: int
    samples: int
    contexts: list[ContextCheck]
    drafter: str = "model"

    def p_values(self) -> list[float]:
        """Every test's p-value, all contexts and positions."""
        return [p for c in self.contexts for p in c.p_values()]

    def summary(self) -> dict[str, float | None]:
        """Means over contexts: acceptance of y_1 (measured, expected, exact-rule β), the extra
        acceptance over β, the measured TV of the first token and its bound, the closed-form drift."""

        def mean(values: list[float | None]) -> float | None:
            vals = [v for v in values if v is not None and math.isfinite(v)]
            return float(np.mean(vals)) if vals else None

        cs = self.contexts
        betas = [c.beta for c in cs]
        return {
            "accept_rate": mean([c.accept_rate for c in cs]),
            "accept_expected": mean([c.accept_expected for c in cs]),
            "beta": mean(betas),
            "extra_acceptance_measured": mean(
                [c.accept_rate - c.beta if c.beta is not None else None for c in cs]
            ),
            "extra_acceptance_exact": mean(
                [
                    c.accept_expected - c.beta
                    if c.beta is not None and c.accept_expected is not None
                    else None
                    for c in cs
                ]
            ),
            "tv_measured": mean([c.first.tv for c in cs]),
            "tv_bound": mean([c.first.tv_bound for c in cs]),
            "drift_tv_exact": mean([c.drift_tv_exact for c in cs]),
        }


@dataclass(frozen=True)
class VerifyReport:
    config_name: str
    target: str
    drafters: list[str]
    rule: str  # "exact" or the lossy rule's label
    lossless_rule: bool
    significance: float
    greedy: list[GreedyCheck]  # one per drafter (empty without T = 0)
    sampling: list[SamplingCheck]  # one per temperature × drafter
    notes: list[str] = field(default_factory=list)

    def _p_values(self) -> list[float]:
        return [p for s in self.sampling for p in s.p_values()]

    @property
    def tests(self) -> int:
        """Sampled-distribution tests run (every context × tested position)."""
        return len(self._p_values())

    @property
    def checks_run(self) -> int:
        """Greedy runs compared plus sampled tests: 0 means nothing was checked."""
        return sum(g.runs for g in self.greedy) + self.tests

    @property
    def min_adjusted_p(self) -> float:
        return bonferroni(self._p_values(), self.significance)[0]

    @property
    def sampling_passed(self) -> bool:
        return bonferroni(self._p_values(), self.significance)[1]

    @property
    def passed(self) -> bool:
        """Lossless: something was checked and every check passed (a check of nothing fails)."""
        greedy_ok = all(g.passed for g in self.greedy)
        return self.checks_run > 0 and greedy_ok and self.sampling_passed
