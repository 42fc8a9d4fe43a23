"""How a request is sampled: temperature, top-k, top-p — a plain value, no torch.

Every layer names a request's sampling with it (logged rows in data/, the runner, verify, accept);
decoding/sampling.py turns it into probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingParams:
    """How logits become a distribution. temperature 0 means greedy (one-hot argmax)."""

    temperature: float = 0.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0
