"""Drafters: what proposes the γ tokens of a round. A small model here; n-gram lookup alongside.

A drafter keeps its own state across rounds: `start` after the target's prefill, `propose` at the
start of each round, `commit` after the verify tells it how many of its tokens were accepted and
which token the target emitted next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

from specbench.decoding.lm import CachedLM
from specbench.decoding.sampling import process_logits, sample
from specbench.decoding.timing import Clock
from specbench.sampling_params import SamplingParams


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
        min_confidence: float = 0.0,
    ) -> None:
        self.lm = lm
        self.params = params
        self.clock = clock
        self.generator = generator
        self.eos_ids = eos_ids
        self.logit_noise = logit_noise
        self.noise_generator = noise_generator
        self.min_confidence = min_confidence  # confidence policy: stop below this top probability
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
            confidence = float(torch.softmax(logits, dim=-1).max())
            if i > 0 and confidence < self.min_confidence:
                # Confidence stop: this position is not proposed (its forward is still counted,
                # it was spent) and the token fed for it leaves the cache again, keeping the
                # invariant "cache = pending + y_1..y_{k-1}". The first position is always proposed.
                self.lm.rollback(len(feed))
                break
            top_prob.append(confidence)
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


class NgramDrafter:
    """Prompt lookup (model-free): find the most recent earlier occurrence of the last n tokens
    (n from `max_n` down to `min_n`) in prompt + generated text and propose up to γ tokens that
    followed it. q is one-hot, so the exact rule accepts y with probability p(y) (docs/theory.md §1).
    No match → an empty proposal: the round is a plain target step (drafted = 0).

    An index maps each n-gram to the position after its latest occurrence; it is extended as the
    sequence grows, so a lookup costs O(max_n), not a scan.
    """

    name = "ngram"

    def __init__(self, min_n: int, max_n: int, clock: Clock) -> None:
        self.min_n, self.max_n, self.clock = min_n, max_n, clock
        self.seq: list[int] = []
        self.index: dict[tuple[int, ...], int] = {}
        self.indexed_upto = 0  # n-grams ending at positions < this are indexed

    def start(self, prompt_ids: list[int], first_token: int) -> float:
        self.seq = [*prompt_ids, first_token]
        self.index = {}
        self.indexed_upto = 0
        return 0.0

    def _extend_index(self) -> None:
        # index n-grams ending strictly before the last position (an *earlier* occurrence)
        end = len(self.seq) - 1
        for stop in range(max(self.indexed_upto, 1), end + 1):
            for n in range(self.min_n, self.max_n + 1):
                if stop - n >= 0:
                    self.index[tuple(self.seq[stop - n : stop])] = stop
        self.indexed_upto = end + 1

    def propose(self, gamma: int) -> Proposal:
        t0 = self.clock.now()
        self._extend_index()
        tokens: list[int] = []
        for n in range(self.max_n, self.min_n - 1, -1):
            if len(self.seq) < n:
                continue
            after = self.index.get(tuple(self.seq[-n:]))
            if after is not None:
                tokens = self.seq[after : after + gamma]
                break
        return Proposal(
            tokens, None, [1.0] * len(tokens), [self.clock.now() - t0] if tokens else []
        )

    def commit(self, proposal: Proposal, n_accepted: int, next_token: int) -> None:
        self.seq.extend([*proposal.tokens[:n_accepted], next_token])
