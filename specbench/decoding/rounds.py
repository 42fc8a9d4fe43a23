"""What one speculative generation records per round, and the γ-policy callback that reads it.

Plain data, no torch: the decoding loop (decoding/generate.py) fills a `Rounds`, the γ policies
(decoding/policies.py) read it, and the trace-replay simulator (analysis/simulate/replay.py) replays the same
policies over recorded rounds without importing torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Rounds:
    """Per-round measurements, one list entry per round (γ may vary under a policy)."""

    gamma: list[int] = field(default_factory=list)  # γ asked for this round
    drafted: list[int] = field(default_factory=list)  # tokens actually drafted (≤ γ; EOS stops)
    accepted: list[int] = field(default_factory=list)
    emitted: list[int] = field(default_factory=list)  # tokens kept (after stop truncation)
    beta: list[list[float]] = field(default_factory=list)  # exact β at each drafted position
    draft_top_prob: list[list[float]] = field(default_factory=list)
    draft_ms: list[list[float]] = field(default_factory=list)
    verify_ms: list[float] = field(default_factory=list)
    overhead_ms: list[float] = field(default_factory=list)  # round wall time outside forwards


# A γ policy as the decoding loop sees it: the rounds so far → γ for the next round.
GammaForRound = Callable[[Rounds], int]
