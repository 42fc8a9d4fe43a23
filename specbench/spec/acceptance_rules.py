"""Acceptance rules for one speculative round: the exact rule, and a clearly labelled LOSSY one.

An acceptance rule takes the drafted tokens y_1..y_k, the processed target distributions
p_1..p_{k+1} and draft distributions q_1..q_k of one round and returns how many draft tokens are
kept and which token is emitted after them (`RoundDecision`). `speculative_round` takes one as its
optional `accept_rule` argument; the default is the exact rule.

- `exact_rule` (docs/theory.md §1, Leviathan et al. 2023, arXiv 2211.17192): accept y_i with probability
  min(1, p_i(y_i)/q_i(y_i)); at the first rejection emit a token from norm(max(0, p_i − q_i)).
  The emitted tokens then follow the target's processed distribution exactly (lossless).
- `LossyRule(ε)`: the "relaxed acceptance" some vendor material recommends, written there as
  "accept when q ≥ p − ε" with the letters swapped (q = target, p = draft, as in gpt-fast). In our
  notation (p = p_target, q = q_draft): accept y_i **outright when p_i(y_i) ≥ q_i(y_i) − ε**, i.e.
  when the draft over-weights y_i by at most ε; otherwise apply the exact test. A rejection still
  resamples from the residual. ε = 0 gives back the exact rule; any ε > 0 accepts more draft
  tokens and moves the output away from p. It is NOT lossless: `specbench verify --lossy-epsilon`
  measures what it costs. Under greedy decoding (one-hot p and q) it equals the exact rule for
  ε < 1.

`first_token_distribution(p, q, ε)` gives, in closed form, the distribution of the first token a
round emits and the probability that y_1 is accepted under either rule — the exact drift of the
lossy rule at a context, with no sampling error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from specbench.spec.sampling import RoundDecision, accept_draft, residual_distribution, sample


class AcceptanceRule(Protocol):
    """The signature of `specbench.spec.sampling.accept_draft`."""

    def __call__(
        self,
        draft_tokens: torch.Tensor,  # (k,) int64
        p_target: torch.Tensor,  # (k+1, V) processed target distributions
        q_draft: torch.Tensor | None,  # (k, V) processed draft distributions; None = one-hot
        greedy: bool,
        generator: torch.Generator | None = None,
    ) -> RoundDecision: ...


# The exact, lossless rule (the engine's default).
exact_rule: AcceptanceRule = accept_draft


def _one_hot_q(draft_tokens: torch.Tensor, p_target: torch.Tensor) -> torch.Tensor:
    q = torch.zeros_like(p_target[: draft_tokens.shape[0]])
    q.scatter_(-1, draft_tokens.unsqueeze(-1), 1.0)
    return q


def lossy_accept(
    draft_tokens: torch.Tensor,  # (k,) int64
    p_target: torch.Tensor,  # (k+1, V)
    q_draft: torch.Tensor | None,  # (k, V); None = one-hot at the drafted tokens
    greedy: bool,
    epsilon: float,
    generator: torch.Generator | None = None,
) -> RoundDecision:
    """LOSSY: accept y_i outright when p_i(y_i) ≥ q_i(y_i) − ε, else apply the exact test.

    Greedy decoding is delegated to the exact rule (with one-hot p and q the relaxation changes
    nothing for ε < 1).
    """
    if greedy:
        return accept_draft(draft_tokens, p_target, q_draft, True, generator)
    gamma = int(draft_tokens.shape[0])
    if q_draft is None:
        q_draft = _one_hot_q(draft_tokens, p_target)
    idx = torch.arange(gamma, device=p_target.device)
    p_y = p_target[idx, draft_tokens]
    q_y = q_draft[idx, draft_tokens]
    u = torch.rand(gamma, generator=generator, device=p_target.device)
    # relaxed: p ≥ q − ε accepts outright; the rest keep the exact test u·q < p
    rejected = ((p_y < q_y - epsilon) & (u * q_y >= p_y)).tolist()
    if True not in rejected:
        return RoundDecision(gamma, int(sample(p_target[gamma], generator)))
    n = rejected.index(True)
    correction = sample(residual_distribution(p_target[n], q_draft[n]), generator)
    return RoundDecision(n, int(correction))


@dataclass(frozen=True)
class LossyRule:
    """The ε-relaxed acceptance rule as an `AcceptanceRule`. LOSSY by construction."""

    epsilon: float

    def __post_init__(self) -> None:
        if not 0.0 < self.epsilon < 1.0:
            raise ValueError(f"the lossy rule's epsilon must be in (0, 1), got {self.epsilon}")

    @property
    def label(self) -> str:
        return f"LOSSY: accept outright when p(y) ≥ q(y) − {self.epsilon:g}"

    def __call__(
        self,
        draft_tokens: torch.Tensor,
        p_target: torch.Tensor,
        q_draft: torch.Tensor | None,
        greedy: bool,
        generator: torch.Generator | None = None,
    ) -> RoundDecision:
        return lossy_accept(draft_tokens, p_target, q_draft, greedy, self.epsilon, generator)


def first_token_distribution(
    p_target: torch.Tensor,  # (V,) processed target distribution at the context
    q_draft: torch.Tensor,  # (V,) processed draft distribution at the context
    epsilon: float = 0.0,
) -> tuple[torch.Tensor, float]:
    """(distribution of a round's first emitted token, P(y_1 accepted)) under the ε-relaxed rule.

    With acceptance probability a(x) = 1 if p(x) ≥ q(x) − ε else p(x)/q(x), the first token is y_1
    when accepted and a residual draw otherwise:
        P(x) = q(x)·a(x) + (1 − Σ_y q(y)·a(y)) · norm(max(0, p − q))(x).
    ε = 0 is the exact rule: q·a = min(p, q), the acceptance probability is β and P = p.
    """
    p, q = p_target.double(), q_draft.double()
    ratio = torch.where(q > 0, p / q.clamp_min(1e-300), torch.ones_like(p))
    a = torch.where(p >= q - epsilon, torch.ones_like(p), ratio)
    kept = q * a  # (V,)
    accept = float(kept.sum().clamp(0.0, 1.0))
    dist = kept + (1.0 - accept) * residual_distribution(p, q)
    return dist, accept
