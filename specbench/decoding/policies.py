"""γ policies: how many tokens to draft in the next round (docs/theory.md §5). Each is recorded per round.

- fixed:       γ every round.
- adaptive:    the practitioners' acceptance-history controller: over the last `window` rounds,
               acceptance (accepted / drafted) > `high` → γ + 1 (≤ max); < `low` → γ − 1 (≥ min).
- heuristic:   Hugging Face's schedule: +2 after a round whose drafts were all accepted, else −1
               (≥ 1, ≤ max).
- confidence:  draft up to `max` tokens but stop at the first position whose draft top
               probability (raw softmax) is below `threshold` (transformers'
               `assistant_confidence_threshold`; SpecDec++ 2405.19715 motivates the rule).
               At least one token is always drafted.
- temperature: γ from the sampling temperature: T > 0.7 → base − 2 (≥ 2); T < 0.3 → base + 2
               (≤ 8); otherwise base.

A policy is a pure function of the rounds so far, so the trace-replay simulator
(`specbench simulate`) applies exactly the same code to recorded rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.config import PolicySpec
from specbench.decoding.rounds import GammaForRound, Rounds


@dataclass(frozen=True)
class Policy:
    """A γ policy instance: `next_gamma(accepted, drafted)` over the rounds so far."""

    spec: PolicySpec
    temperature: float = 0.0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def max_gamma(self) -> int:
        """The most tokens a round may draft under this policy (the γ the unit is filed under)."""
        s = self.spec
        if s.name == "fixed":
            return s.gamma
        if s.name == "temperature":
            return self._temperature_gamma()
        return s.max_gamma

    @property
    def min_confidence(self) -> float:
        return self.spec.threshold if self.spec.name == "confidence" else 0.0

    def _temperature_gamma(self) -> int:
        base = self.spec.gamma
        if self.temperature > 0.7:
            return max(2, base - 2)
        if self.temperature < 0.3:
            return min(8, base + 2)
        return base

    def initial_gamma(self) -> int:
        s = self.spec
        if s.name == "fixed":
            return s.gamma
        if s.name == "temperature":
            return self._temperature_gamma()
        if s.name == "confidence":
            return s.max_gamma
        return s.gamma

    def update(self, gamma: int, accepted: Sequence[int], drafted: Sequence[int]) -> int:
        """γ for the next round, given the γ just used and the history including that round."""
        s = self.spec
        if s.name == "heuristic":
            a, d = accepted[-1], drafted[-1]
            return min(s.max_gamma, gamma + 2) if d > 0 and a == d else max(1, gamma - 1)
        if s.name == "adaptive":
            lo = max(0, len(accepted) - s.window)
            acc, dra = sum(accepted[lo:]), sum(drafted[lo:])
            rate = acc / dra if dra else 0.0
            if rate > s.high:
                return min(s.max_gamma, gamma + 1)
            if rate < s.low:
                return max(s.min_gamma, gamma - 1)
            return gamma
        return gamma  # fixed, confidence and temperature do not react to history

    def controller(self) -> GammaForRound:
        """A `gamma_for_round` callback for `speculative_generate`, carrying the policy's state."""
        state = {"gamma": self.initial_gamma(), "seen": 0}

        def gamma_for_round(rounds: Rounds) -> int:
            while state["seen"] < len(rounds.accepted):
                state["seen"] += 1
                n = state["seen"]
                state["gamma"] = self.update(
                    state["gamma"], rounds.accepted[:n], rounds.drafted[:n]
                )
            return state["gamma"]

        return gamma_for_round
