"""Logits → processed probabilities, sampling, and the exact speculative acceptance rule.

Pure torch on tensors; no models. The rule follows Leviathan et al. 2023 (arXiv 2211.17192, Alg. 1)
and Chen et al. 2023 (arXiv 2302.01318): accept draft token y_i with probability
min(1, p_i(y_i) / q_i(y_i)); at the first rejection emit a token from norm(max(0, p_i − q_i)); if all
γ are accepted emit a bonus token from p_{γ+1}. p and q must be *processed* identically
(temperature, top-k, top-p) for the output to follow the target's processed distribution exactly.
Notation: p = p_target, q = q_draft (gpt-fast swaps the letters; we don't).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    """How logits become a distribution. temperature 0 means greedy (one-hot argmax)."""

    temperature: float = 0.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def process_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Return float32 probabilities (..., V) after temperature, top-k and top-p.

    Greedy (temperature 0) gives a one-hot vector at the argmax (first index on ties).
    """
    logits = logits.float()
    if params.greedy:
        out = torch.zeros_like(logits)
        out.scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
        return out
    logits = logits / params.temperature
    vocab = logits.shape[-1]
    if 0 < params.top_k < vocab:
        kth = torch.topk(logits, params.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if params.top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        # keep the smallest prefix whose mass reaches top_p: drop a token when the mass *before* it
        # already reaches top_p (the first token is always kept).
        drop_sorted = (torch.cumsum(sorted_p, dim=-1) - sorted_p) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Draw one token id per row of probs (..., V) → (...,) int64."""
    flat = probs.reshape(-1, probs.shape[-1])
    ids = torch.multinomial(flat, 1, generator=generator)
    return ids.reshape(probs.shape[:-1])


def exact_beta(p_target: torch.Tensor, q_draft: torch.Tensor) -> torch.Tensor:
    """β = Σ_x min(p(x), q(x)) = 1 − TV(p, q): the probability a drafted position is accepted."""
    return torch.minimum(p_target, q_draft).sum(dim=-1)


def residual_distribution(p_target: torch.Tensor, q_draft: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p − q)), the distribution a rejection resamples from.

    When p ≤ q everywhere (p == q up to rounding) the residual has no mass; a rejection then has
    probability ~0, and p itself is the correct fallback.
    """
    diff = torch.clamp(p_target - q_draft, min=0.0)
    mass = diff.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, diff / mass.clamp_min(1e-30), p_target)


@dataclass(frozen=True)
class RoundDecision:
    """Outcome of one verify: how many draft tokens were accepted and the token emitted after them."""

    n_accepted: int
    next_token: int  # the correction (after a rejection) or the bonus token (all accepted)


def accept_draft(
    draft_tokens: torch.Tensor,  # (γ,) int64
    p_target: torch.Tensor,  # (γ+1, V) processed target distributions at the γ+1 verified positions
    q_draft: torch.Tensor | None,  # (γ, V) processed draft distributions; None = one-hot (n-gram)
    greedy: bool,
    generator: torch.Generator | None = None,  # on p_target's device
) -> RoundDecision:
    """The exact acceptance rule for one round (docs/theory.md §1).

    A deterministic drafter (n-gram lookup) has q = one-hot at its token: the rule then accepts y
    with probability p(y) and resamples a rejection from norm(max(0, p − one-hot)).
    """
    gamma = int(draft_tokens.shape[0])
    if greedy:
        # One-hot p and q: accept iff y_i = argmax p_i; the correction is argmax p_i.
        target_argmax = p_target.argmax(dim=-1)  # (γ+1,)
        matches = (target_argmax[:gamma] == draft_tokens).tolist()
        n = matches.index(False) if False in matches else gamma
        return RoundDecision(n, int(target_argmax[n]))
    if q_draft is None:
        q_draft = torch.zeros_like(p_target[:gamma])
        q_draft.scatter_(-1, draft_tokens.unsqueeze(-1), 1.0)
    idx = torch.arange(gamma, device=p_target.device)
    p_y = p_target[idx, draft_tokens]
    q_y = q_draft[idx, draft_tokens]
    u = torch.rand(gamma, generator=generator, device=p_target.device)
    # accept iff u < p/q  ⇔  u·q < p (no division; q(y) > 0 since y was sampled from q)
    rejected = (u * q_y >= p_y).tolist()
    if True not in rejected:
        return RoundDecision(gamma, int(sample(p_target[gamma], generator)))
    n = rejected.index(True)
    correction = sample(residual_distribution(p_target[n], q_draft[n]), generator)
    return RoundDecision(n, int(correction))
