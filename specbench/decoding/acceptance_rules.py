"""The acceptance rules of one speculative round — the one place they live.

A round drafts y_1..y_k; the target's verify forward gives the processed distributions
p_1..p_{k+1}, the drafter's q_1..q_k. An acceptance rule decides how many drafts are kept and which
token is emitted after them (`RoundDecision`). Notation: p = p_target, q = q_draft (gpt-fast swaps
the letters; we don't). p and q must be *processed* identically (temperature, top-k, top-p,
decoding/sampling.py) for the output to follow the target's processed distribution exactly.

- `accept_draft` / `exact_rule` (docs/theory.md §1; Leviathan et al. 2023, arXiv 2211.17192,
  Alg. 1; Chen et al. 2023, arXiv 2302.01318): accept y_i with probability min(1, p_i(y_i) /
  q_i(y_i)); at the first rejection emit a token from norm(max(0, p_i − q_i))
  (`residual_distribution`); if all k are accepted emit a bonus token from p_{k+1}. The emitted
  tokens then follow p exactly (lossless). A deterministic drafter (n-gram lookup) has q = one-hot
  at its token: y is then accepted with probability p(y) and a rejection resamples from
  norm(max(0, p − one-hot)).
- `greedy_decision`: temperature 0, one-hot p and q — accept while y_i = argmax p_i; the token after
  them is argmax p at the first mismatch (or the bonus position).
- `LossyRule(ε)` / `lossy_accept`: the "relaxed acceptance" some vendor material recommends,
  written there as "accept when q ≥ p − ε" with the letters swapped (q = target, p = draft, as in
  gpt-fast). In our notation: accept y_i **outright when p_i(y_i) ≥ q_i(y_i) − ε**, i.e. when the
  draft over-weights y_i by at most ε; otherwise apply the exact test. A rejection still resamples
  from the residual. ε = 0 gives back the exact rule; any ε > 0 accepts more draft tokens and moves
  the output away from p. It is NOT lossless: `specbench verify --lossy-epsilon` measures what it
  costs. Under greedy decoding (one-hot p and q) it equals the exact rule for ε < 1.

β, the probability that a drafted position is accepted under the exact rule, is
Σ_x min(p(x), q(x)) = 1 − TV(p, q) (`exact_beta`, docs/theory.md §2); `drafted_beta` gives it at
each drafted position of a round (p(y) for a one-hot q). `first_token_distribution(p, q, ε)` gives,
in closed form, the distribution of the first token a round emits and the probability that y_1 is
accepted under either rule — the exact drift of the lossy rule at a context, with no sampling error.

Pure torch on tensors; no models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from specbench.decoding.sampling import sample


@dataclass(frozen=True)
class RoundDecision:
    """Outcome of one verify: how many draft tokens were accepted and the token emitted after them."""

    n_accepted: int
    next_token: int  # the correction (after a rejection) or the bonus token (all accepted)


class AcceptanceRule(Protocol):
    """The signature of `accept_draft`; `speculative_round` takes one as `accept_rule`."""

    def __call__(
        self,
        draft_tokens: torch.Tensor,  # (k,) int64
        p_target: torch.Tensor,  # (k+1, V) processed target distributions
        q_draft: torch.Tensor | None,  # (k, V) processed draft distributions; None = one-hot
        greedy: bool,
        generator: torch.Generator | None = None,
    ) -> RoundDecision: ...


def exact_beta(p_target: torch.Tensor, q_draft: torch.Tensor) -> torch.Tensor:
    """β = Σ_x min(p(x), q(x)) = 1 − TV(p, q): the probability a drafted position is accepted."""
    return torch.minimum(p_target, q_draft).sum(dim=-1)


def drafted_beta(
    p_target: torch.Tensor,  # (k, V) processed target distributions at the drafted positions
    q_draft: torch.Tensor | None,  # (k, V) processed draft distributions; None = one-hot (n-gram)
    draft_tokens: torch.Tensor,  # (k,) int64; both tensors on p_target's device
) -> list[float]:
    """Exact β at each drafted position; for a one-hot q (n-gram) β = p(y)."""
    if q_draft is not None:
        return exact_beta(p_target, q_draft).tolist()
    k = int(draft_tokens.shape[0])
    return p_target[torch.arange(k, device=p_target.device), draft_tokens].tolist()


def residual_distribution(p_target: torch.Tensor, q_draft: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p − q)), the distribution a rejection resamples from.

    When p ≤ q everywhere (p == q up to rounding) the residual has no mass; a rejection then has
    probability ~0, and p itself is the correct fallback.
    """
    diff = torch.clamp(p_target - q_draft, min=0.0)
    mass = diff.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, diff / mass.clamp_min(1e-30), p_target)


def greedy_decision(
    target_argmax: torch.Tensor,  # (k+1,) int64: argmax of the target's logits at each position
    draft_tokens: torch.Tensor,  # (k,) int64
) -> tuple[RoundDecision, list[bool]]:
    """The greedy rule: keep drafts while they equal the target's argmax, then emit its argmax.

    Also returns the match indicator per drafted position (β under one-hot p and q).
    """
    k = int(draft_tokens.shape[0])
    matches = (target_argmax[:k] == draft_tokens).tolist()
    n = matches.index(False) if False in matches else k
    return RoundDecision(n, int(target_argmax[n])), matches


def _one_hot_q(draft_tokens: torch.Tensor, p_target: torch.Tensor) -> torch.Tensor:
    q = torch.zeros_like(p_target[: draft_tokens.shape[0]])
    q.scatter_(-1, draft_tokens.unsqueeze(-1), 1.0)
    return q


def _emit(
    rejected: list[bool],
    p_target: torch.Tensor,
    q_draft: torch.Tensor,
    generator: torch.Generator | None,
) -> RoundDecision:
    """The token after the accepted drafts: a residual draw at the first rejection, else a bonus
    token from p_{k+1}."""
    if True not in rejected:
        k = len(rejected)
        return RoundDecision(k, int(sample(p_target[k], generator)))
    n = rejected.index(True)
    correction = sample(residual_distribution(p_target[n], q_draft[n]), generator)
    return RoundDecision(n, int(correction))


def accept_draft(
    draft_tokens: torch.Tensor,  # (γ,) int64
    p_target: torch.Tensor,  # (γ+1, V) processed target distributions at the γ+1 verified positions
    q_draft: torch.Tensor | None,  # (γ, V) processed draft distributions; None = one-hot (n-gram)
    greedy: bool,
    generator: torch.Generator | None = None,  # on p_target's device
) -> RoundDecision:
    """The exact acceptance rule for one round (docs/theory.md §1; module docstring)."""
    if greedy:
        return greedy_decision(p_target.argmax(dim=-1), draft_tokens)[0]
    gamma = int(draft_tokens.shape[0])
    if q_draft is None:
        q_draft = _one_hot_q(draft_tokens, p_target)
    idx = torch.arange(gamma, device=p_target.device)
    p_y = p_target[idx, draft_tokens]
    q_y = q_draft[idx, draft_tokens]
    u = torch.rand(gamma, generator=generator, device=p_target.device)
    # accept iff u < p/q  ⇔  u·q < p (no division; q(y) > 0 since y was sampled from q)
    rejected = (u * q_y >= p_y).tolist()
    return _emit(rejected, p_target, q_draft, generator)


# The exact, lossless rule (the engine's default).
exact_rule: AcceptanceRule = accept_draft


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
    return _emit(rejected, p_target, q_draft, generator)


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
