"""The two decoding loops specbench measures, batch size 1: speculative and target-only.

Both loops share prefill, sampling, stop handling and token counting (generated token ids are
counted on both sides; text is never re-tokenized), so their tokens/s are comparable.

Speculative round (docs/theory.md §1): the drafter proposes y_1..y_k; the target runs once over
[last, y_1..y_k] giving p_1..p_{k+1}; `accept_draft` keeps y_1..y_n and emits one more token; the
target cache is cropped by the k − n rejected positions, the drafter rolls back its own.

Both loops also keep log p_target(emitted token) of every emitted token as device tensors (the
target distribution at that position is computed anyway), summed once after the loop: the
answer's mean log-probability under the target (docs/theory.md §13). Under sampling p is the
processed distribution (temperature, top-k, top-p) the token was drawn from — for a correction
token drawn from norm(max(0, p − q)) it is still p(token); under greedy the processed p is
one-hot, so the raw softmax (T = 1) is used: the target's own confidence in its argmax.

Stop strings: the loops take a `StopCheck`, a plain function of the output ids (the runner builds
it from the tokenizer's decoded text), and cut the output themselves (`_Stopper`). transformers'
`StopStringCriteria` is not used, for three reasons: (1) it answers "does a stop string end in the
*last* token?", one token at a time, while a speculative round appends up to γ + 1 tokens at once
and must cut at the first of them that completes the string, so it would run once per emitted
prefix and still leave the cutting to us; (2) it matches the vocabulary's token strings (and the
prompt's tail), while our check matches the decoded answer text — what OpenAI-compatible servers
such as vLLM match their `stop` strings against, so `stop_reason` means the same for this loop and
the serving backends; the two differ on tokenizers whose decoding is not the concatenation of token
strings (SentencePiece "▁", space clean-up, split UTF-8 bytes); (3) switching would move the cut on
such tokenizers and change recorded outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from specbench.decoding.acceptance_rules import (
    AcceptanceRule,
    accept_draft,
    drafted_beta,
    greedy_decision,
)
from specbench.decoding.drafters import Drafter, Proposal
from specbench.decoding.lm import CachedLM
from specbench.decoding.rounds import GammaForRound, Rounds
from specbench.decoding.sampling import process_logits, sample
from specbench.decoding.timing import Clock
from specbench.sampling_params import SamplingParams

# A stop check returns the number of generated tokens to keep when a stop string has appeared.
StopCheck = Callable[[list[int]], int | None]


@dataclass
class Generation:
    output_ids: list[int]
    stop_reason: str  # "eos" | "max_new_tokens" | "stop_string"
    ttft_ms: float  # target prefill + first token
    wall_ms: float  # prefill start → last token
    draft_prefill_ms: float = 0.0
    rounds: Rounds | None = None  # speculative only
    step_ms: list[float] = field(default_factory=list)  # baseline only: each decode step
    forward_ms: list[float] = field(default_factory=list)  # baseline only: model forward part
    # mean log p_target(token) over output_ids (module docstring); None when nothing was emitted
    target_mean_logprob: float | None = None

    @property
    def new_tokens(self) -> int:
        return len(self.output_ids)


class _Stopper:
    """Applies EOS, max_new_tokens and stop strings to a growing output, in that order."""

    def __init__(self, eos_ids: frozenset[int], max_new_tokens: int, stop: StopCheck | None):
        self.eos_ids, self.max_new_tokens, self.stop = eos_ids, max_new_tokens, stop
        self.reason = ""

    def extend(self, out: list[int], new: list[int]) -> int:
        """Append what may be emitted of `new`; return how many were kept. Sets `reason` on stop."""
        kept = 0
        for tok in new:
            out.append(tok)
            kept += 1
            if tok in self.eos_ids:
                self.reason = "eos"
                break
            if len(out) >= self.max_new_tokens:
                self.reason = "max_new_tokens"
                break
        if self.stop is not None:
            cut = self.stop(out)
            if cut is not None:
                kept -= len(out) - cut
                del out[cut:]
                self.reason = "stop_string"
        return kept


def _pick(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> tuple[int, torch.Tensor]:
    """The next token and its log-probability under the target (a 0-d device tensor, no sync)."""
    if params.greedy:
        tok = int(logits.argmax())
        return tok, torch.log_softmax(logits.float(), dim=-1)[tok]
    probs = process_logits(logits, params)
    tok = int(sample(probs, generator))
    return tok, torch.log(probs[tok])


def _mean_logprob(parts: list[torch.Tensor], n_tokens: int) -> float | None:
    """Mean of the first n_tokens per-token log-probabilities: ONE device read after the loop.
    The output is always a prefix of everything emitted (stop truncation only cuts the end)."""
    if n_tokens == 0 or not parts:
        return None
    flat = torch.cat([p.reshape(-1) for p in parts])[:n_tokens]
    return float(flat.double().mean())


def baseline_generate(
    target: CachedLM,
    prompt_ids: list[int],
    params: SamplingParams,
    max_new_tokens: int,
    clock: Clock,
    eos_ids: frozenset[int] = frozenset(),
    stop: StopCheck | None = None,
    generator: torch.Generator | None = None,
) -> Generation:
    """Target-only decoding with the same cache handling and sampling as the speculative loop."""
    stopper = _Stopper(eos_ids, max_new_tokens, stop)
    target.reset()
    out: list[int] = []
    step_ms: list[float] = []
    forward_ms: list[float] = []
    t_start = clock.now()
    first, first_lp = _pick(target.feed(prompt_ids, keep=1)[-1], params, generator)
    t_first = clock.now()
    stopper.extend(out, [first])
    logprobs = [first_lp]
    while not stopper.reason:
        t0 = clock.now()
        logits = target.feed([out[-1]], keep=1)[-1]
        t1 = clock.now()
        tok, lp = _pick(logits, params, generator)
        t2 = clock.now()
        forward_ms.append(t1 - t0)
        step_ms.append(t2 - t0)
        stopper.extend(out, [tok])
        logprobs.append(lp)
    wall_ms = clock.now() - t_start
    return Generation(
        output_ids=out,
        stop_reason=stopper.reason,
        ttft_ms=t_first - t_start,
        wall_ms=wall_ms,
        step_ms=step_ms,
        forward_ms=forward_ms,
        target_mean_logprob=_mean_logprob(logprobs, len(out)),
    )


@dataclass
class RoundResult:
    proposal: Proposal
    n_accepted: int
    next_token: int
    beta: list[float]
    verify_ms: float
    # log p_target of each emitted token, (n_accepted + 1,) on the device (module docstring)
    logprob: torch.Tensor | None = None

    @property
    def emitted(self) -> list[int]:
        return [*self.proposal.tokens[: self.n_accepted], self.next_token]


def speculative_round(
    target: CachedLM,
    drafter: Drafter,
    last_token: int,
    gamma: int,
    params: SamplingParams,
    clock: Clock,
    generator: torch.Generator | None = None,
    accept_rule: AcceptanceRule | None = None,  # None = the exact rule (`accept_draft`)
) -> RoundResult:
    """One round: draft, verify [last, y_1..y_k] in one target forward, accept, roll back.

    On entry the target cache holds everything before `last_token`; on exit it holds everything
    before the round's last emitted token (the correction or bonus token), as does the drafter.
    """
    proposal = drafter.propose(gamma)
    k = len(proposal.tokens)
    t_verify = clock.now()
    logits = target.feed([last_token, *proposal.tokens], keep=k + 1)  # (k+1, V)
    verify_ms = clock.now() - t_verify
    drafted = torch.tensor(proposal.tokens, dtype=torch.long, device=logits.device)
    if params.greedy:
        target_argmax = logits.argmax(dim=-1)  # (k+1,)
        decision, matches = greedy_decision(target_argmax, drafted)
        n_accepted, next_token = decision.n_accepted, decision.next_token
        beta = [float(m) for m in matches]  # one-hot p and q: β is the match indicator
        # emitted = the target's argmax at positions 0..n: log of its raw (T = 1) probability
        logp = torch.log_softmax(logits[: n_accepted + 1].float(), dim=-1)
        logprob = logp.gather(-1, target_argmax[: n_accepted + 1].unsqueeze(-1)).squeeze(-1)
    else:
        p_target = process_logits(logits, params)  # (k+1, V)
        q_draft = proposal.q_draft
        if q_draft is not None:
            q_draft = q_draft.to(p_target.device)
        beta = drafted_beta(p_target[:k], q_draft, drafted)  # one-hot q (n-gram): β = p(y)
        rule = accept_rule or accept_draft
        decision = rule(drafted, p_target, q_draft, greedy=False, generator=generator)
        n_accepted, next_token = decision.n_accepted, decision.next_token
        # p of each emitted token: accepted drafts at 0..n−1, the correction/bonus at n (its p,
        # not the residual it was drawn from)
        idx = torch.arange(n_accepted, device=p_target.device)
        emitted_p = torch.cat(
            [p_target[idx, drafted[:n_accepted]], p_target[n_accepted, next_token].reshape(1)]
        )
        logprob = torch.log(emitted_p)
    target.rollback(k - n_accepted)
    drafter.commit(proposal, n_accepted, next_token)
    return RoundResult(proposal, n_accepted, next_token, beta, verify_ms, logprob)


def speculative_generate(
    target: CachedLM,
    drafter: Drafter,
    prompt_ids: list[int],
    gamma_for_round: GammaForRound,
    params: SamplingParams,
    max_new_tokens: int,
    clock: Clock,
    eos_ids: frozenset[int] = frozenset(),
    stop: StopCheck | None = None,
    generator: torch.Generator | None = None,
    accept_rule: AcceptanceRule | None = None,  # None = the exact rule
) -> Generation:
    """Exact speculative decoding. `gamma_for_round` sees the rounds so far (a γ policy)."""
    stopper = _Stopper(eos_ids, max_new_tokens, stop)
    rounds = Rounds()
    target.reset()
    out: list[int] = []
    t_start = clock.now()
    first, first_lp = _pick(target.feed(prompt_ids, keep=1)[-1], params, generator)
    t_first = clock.now()
    stopper.extend(out, [first])
    logprobs, complete = [first_lp], True
    draft_prefill_ms = drafter.start(prompt_ids, first)
    while not stopper.reason:
        t_round = clock.now()
        remaining = max_new_tokens - len(out)
        # Never draft more than can be emitted: the round emits up to γ + 1 tokens.
        gamma = max(1, min(gamma_for_round(rounds), remaining - 1))
        step = speculative_round(
            target, drafter, out[-1], gamma, params, clock, generator, accept_rule
        )
        kept = stopper.extend(out, step.emitted)
        if step.logprob is None:  # a custom round without it: no figure rather than a wrong one
            complete = False
        else:
            logprobs.append(step.logprob)
        round_ms = clock.now() - t_round
        proposal = step.proposal
        rounds.gamma.append(gamma)
        rounds.drafted.append(len(proposal.tokens))
        rounds.accepted.append(step.n_accepted)
        rounds.emitted.append(kept)
        rounds.beta.append(step.beta)
        rounds.draft_top_prob.append(proposal.top_prob)
        rounds.draft_ms.append(proposal.step_ms)
        rounds.verify_ms.append(step.verify_ms)
        rounds.overhead_ms.append(round_ms - step.verify_ms - sum(proposal.step_ms))
    wall_ms = clock.now() - t_start
    return Generation(
        output_ids=out,
        stop_reason=stopper.reason,
        ttft_ms=t_first - t_start,
        wall_ms=wall_ms,
        draft_prefill_ms=draft_prefill_ms,
        rounds=rounds,
        target_mean_logprob=_mean_logprob(logprobs, len(out)) if complete else None,
    )


def fixed_gamma(gamma: int) -> GammaForRound:
    """The fixed-γ policy."""
    return lambda _rounds: gamma
