"""Drafters: what proposes the γ tokens of a round. A small model here; n-gram lookup alongside.

A drafter keeps its own state across rounds: `start` after the target's prefill, `propose` at the
start of each round, `commit` after the verify tells it how many of its tokens were accepted and
which token the target emitted next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

from specbench.engine.lm import CachedLM
from specbench.sampling import SamplingParams, process_logits, sample
from specbench.timing import Clock


@dataclass
class Proposal:
    tokens: list[int]  # y_1..y_k, k ≤ γ
    q_draft: torch.Tensor | None  # (k, V) processed draft distributions; None = one-hot at tokens
    top_prob: list[float]  # the draft's top probability at T = 1 (raw softmax) per position
    step_ms: list[float] = field(default_factory=list)  # model forward time per draft step


class Drafter(Protocol):
    name: str

    def start(self, prompt_ids: list[int], first_token: int) -> float:
        """Prepare for a new generation; return the time spent (ms) on the draft's prefill."""
        ...

    def propose(self, gamma: int) -> Proposal: ...

    def commit(self, proposal: Proposal, n_accepted: int, next_token: int) -> None: ...


class ModelDrafter:
    """A draft model with its own KV cache.

    Cache invariant: at the start of a round the cache holds every emitted token except those in
    `pending` (one token — the last correction/bonus — or two after an all-accepted round, whose
    last draft token was never fed). Rejected draft positions are cropped, never recomputed.
    """

    name = "model"

    def __init__(
        self,
        lm: CachedLM,
        params: SamplingParams,
        clock: Clock,
        generator: torch.Generator | None = None,
        eos_ids: frozenset[int] = frozenset(),
        logit_noise: float = 0.0,
        noise_generator: torch.Generator | None = None,
    ) -> None:
        self.lm = lm
        self.params = params
        self.clock = clock
        self.generator = generator
        self.eos_ids = eos_ids
        self.logit_noise = logit_noise
        self.noise_generator = noise_generator
        self.pending: list[int] = []

    def start(self, prompt_ids: list[int], first_token: int) -> float:
        self.lm.reset()
        t0 = self.clock.now()
        self.lm.feed(prompt_ids, keep=1)
        t1 = self.clock.now()
        self.pending = [first_token]
        return t1 - t0

    def _weaken(self, logits: torch.Tensor) -> torch.Tensor:
        if self.logit_noise <= 0.0:
            return logits
        noise = torch.randn(
            logits.shape, generator=self.noise_generator, device=logits.device, dtype=logits.dtype
        )
        return logits + self.logit_noise * noise

    def propose(self, gamma: int) -> Proposal:
        clock, greedy = self.clock, self.params.greedy
        tokens: list[int] = []
        q_rows: list[torch.Tensor] = []
        top_prob: list[float] = []
        step_ms: list[float] = []
        feed = self.pending
        for i in range(gamma):
            t0 = clock.now()
            logits = self._weaken(self.lm.feed(feed, keep=1)[-1].float())  # (V,)
            step_ms.append(clock.now() - t0)
            top_prob.append(float(torch.softmax(logits, dim=-1).max()))
            if greedy:
                token = int(logits.argmax())
            else:
                q = process_logits(logits, self.params)
                q_rows.append(q)
                token = int(sample(q, self.generator))
            tokens.append(token)
            # Drafting past EOS is wasted work: the verify stops the generation there anyway.
            if token in self.eos_ids or i == gamma - 1:
                break
            feed = [token]
        q_draft = None if greedy else torch.stack(q_rows)
        return Proposal(tokens, q_draft, top_prob, step_ms)

    def commit(self, proposal: Proposal, n_accepted: int, next_token: int) -> None:
        k = len(proposal.tokens)
        # The cache holds pending + y_1..y_{k-1}: keep y_1..y_n.
        if n_accepted < k:
            self.lm.rollback(k - 1 - n_accepted)
            self.pending = [next_token]
        else:
            self.pending = [proposal.tokens[-1], next_token]
