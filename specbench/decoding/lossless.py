"""The torch side of `specbench verify`'s sampled check: what one speculative round emits when it
is run many times from the same state, and what those tokens should follow.

- `sample_rounds`: n independent rounds of the real `speculative_round` from one context state.
- `prefix_distributions`: the oracle — the target's processed p(· | context, e_1..e_{j−1}) at every
  prefix the rounds emitted, from fresh forwards (never a round's own verify forward).
- `first_token_expectation`: in closed form, P(y_1 accepted) and the first emitted token's
  distribution under the round's rule (docs/theory.md §1; `acceptance_rules.first_token_distribution`).

The statistical tests that compare the two sides are pure (analysis/verify/lossless_tests.py); the
orchestration is harness/verify/verify.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from specbench.decoding.acceptance_rules import (
    AcceptanceRule,
    LossyRule,
    exact_beta,
    first_token_distribution,
)
from specbench.decoding.drafters import Drafter
from specbench.decoding.generate import speculative_round
from specbench.decoding.lm import CachedLM
from specbench.decoding.sampling import process_logits
from specbench.decoding.timing import Clock
from specbench.sampling_params import SamplingParams

PREFIX_BATCH = 64  # prefixes scored per batched forward


@dataclass(frozen=True)
class RoundSample:
    n_accepted: int
    drafted: int
    emitted: tuple[int, ...]  # 1..γ+1 tokens: accepted drafts, then the correction or bonus


def sample_rounds(
    target: CachedLM,
    drafter: Drafter,
    context: list[int],
    params: SamplingParams,
    gamma: int,
    n: int,
    clock: Clock,
    generator: torch.Generator,
    rule: AcceptanceRule | None,
) -> list[RoundSample]:
    """n independent rounds of the real speculative loop, each from the same context state."""
    prefix, last = context[:-1], context[-1]
    target.reset()
    target.feed(prefix, keep=1)
    base_len = target.length
    out = []
    for _ in range(n):
        drafter.start(prefix, last)
        step = speculative_round(
            target, drafter, last, gamma, params, clock, generator, accept_rule=rule
        )
        out.append(RoundSample(step.n_accepted, len(step.proposal.tokens), tuple(step.emitted)))
        target.rollback(target.length - base_len)
    return out


def context_distribution(lm: CachedLM, ids: list[int], params: SamplingParams) -> torch.Tensor:
    """The model's processed next-token distribution after `ids` (V,), from a reset cache."""
    lm.reset()
    return process_logits(lm.feed(ids, keep=1)[-1], params)


@dataclass(frozen=True)
class FirstTokenExpectation:
    """Closed-form figures of a round's first emitted token at one context."""

    beta: float  # exact P(y_1 accepted) under the exact rule
    accept_expected: float  # P(y_1 accepted) under the round's rule (β for the exact rule)
    drift_tv: float  # TV(the rule's first-token distribution, p): 0 for the exact rule


def first_token_expectation(
    p_target: torch.Tensor,  # (V,) processed target distribution at the context
    q_draft: torch.Tensor,  # (V,) processed draft distribution at the context
    rule: AcceptanceRule | None,
) -> FirstTokenExpectation:
    """β, the rule's acceptance of y_1 and its drift, in closed form (exact or `LossyRule`)."""
    q = q_draft.to(p_target.device)
    beta = float(exact_beta(p_target, q))
    eps = rule.epsilon if isinstance(rule, LossyRule) else 0.0
    dist, accept_expected = first_token_distribution(p_target, q, eps)
    drift = 0.5 * float((dist - p_target.double()).abs().sum())
    return FirstTokenExpectation(beta, accept_expected, drift)


def prefix_distributions(
    target: CachedLM, context: list[int], prefixes: set[tuple[int, ...]], params: SamplingParams
) -> dict[tuple[int, ...], np.ndarray]:
    """The target's processed p(· | context + prefix) (V,) for every non-empty prefix asked for.

    These are the oracle of the later-position tests, so they come from fresh forwards of the
    context plus the tokens — no KV cache at all, never a round's own verify forward: a round
    that uses the wrong row, or a cache that holds the wrong tokens, is then caught. Only the
    longest prefixes are run (a row per token holds every shorter prefix), PREFIX_BATCH at a
    time, right-padded: under causal attention no real position sees the padding.
    """
    chosen: list[tuple[int, ...]] = []
    covered: set[tuple[int, ...]] = set()
    for seq in sorted(prefixes, key=len, reverse=True):
        if seq not in covered:
            chosen.append(seq)
            covered.update(seq[: k + 1] for k in range(len(seq)))
    out: dict[tuple[int, ...], np.ndarray] = {}
    n_ctx = len(context)
    for i in range(0, len(chosen), PREFIX_BATCH):
        chunk = chosen[i : i + PREFIX_BATCH]
        width = max(len(s) for s in chunk)
        ids = torch.zeros((len(chunk), n_ctx + width), dtype=torch.long, device=target.device)
        ids[:, :n_ctx] = torch.tensor(context, dtype=torch.long, device=target.device)
        for b, seq in enumerate(chunk):
            ids[b, n_ctx : n_ctx + len(seq)] = torch.tensor(
                seq, dtype=torch.long, device=target.device
            )
        # logits at positions n_ctx … n_ctx + width − 1: row k follows the prefix's first k + 1
        logits = target.model(input_ids=ids, use_cache=False, logits_to_keep=width).logits
        logits = logits[:, :, : target.vocab_size]  # (B, width, V)
        rows = process_logits(logits.reshape(-1, logits.shape[-1]), params)
        rows_np = rows.double().cpu().numpy().reshape(len(chunk), width, -1)
        for b, seq in enumerate(chunk):
            for k in range(len(seq)):
                out.setdefault(seq[: k + 1], rows_np[b, k])
    return out
