"""The two checks of `specbench verify` (docs/theory.md §1, docs/verify.md), and their results.

- `greedy_check` (T = 0): speculative tokens must equal target-only greedy tokens, prompt by
  prompt. Every differing prompt is listed with the first differing position and the target's
  logit margin between the two tokens there. In fp32 any difference fails; in fp16/bf16 a flip
  whose margin is within the dtype's rounding tolerance is a near-tie flip: reported, not failed.
- `check_context` (T > 0): one speculative round is run n times from the same state at a context
  (decoding/lossless.py). Every emitted position j of the round (1..γ+1, the bonus token included) is
  tested on the rounds that reached it against the target's processed p(· | context, e_1..e_{j−1})
  from separate target forwards: position 1 by χ² on the token counts, later positions by the
  pooled probability integral transform (analysis/verify/lossless_tests.py).

harness/verify/verify.py picks the contexts and drafters and runs these for the whole config.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from specbench.analysis.verify.lossless_tests import PositionTest, goodness_of_fit, pit_test
from specbench.analysis.verify.verify_results import ContextCheck, GreedyCheck, GreedyMismatch
from specbench.decoding.acceptance_rules import AcceptanceRule
from specbench.decoding.drafters import Drafter
from specbench.decoding.generate import baseline_generate, fixed_gamma, speculative_generate
from specbench.decoding.lm import CachedLM
from specbench.decoding.lossless import (
    RoundSample,
    context_distribution,
    first_token_expectation,
    prefix_distributions,
    sample_rounds,
)
from specbench.decoding.timing import Clock
from specbench.errors import SpecbenchError
from specbench.sampling_params import SamplingParams

GREEDY = SamplingParams()
# Logit margin (units of logits) under which a greedy flip counts as a rounding near-tie.
NEAR_TIE_TOLERANCE = {"float32": 0.0, "float16": 0.1, "bfloat16": 0.5}

# (draft LM or None for a model-free drafter, sampling, generator) → a fresh drafter
DrafterFactory = Callable[[CachedLM | None, SamplingParams, torch.Generator], Drafter]


@dataclass(frozen=True)
class Context:
    label: str  # "<prompt id>+<answer offset>"
    workload: str
    ids: list[int]


# ---------------------------------------------------------------------------------------------
# greedy identity


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@torch.inference_mode()
def greedy_check(
    target: CachedLM,
    draft: CachedLM | None,
    make_drafter: DrafterFactory,
    prompts: list[Context],
    gammas: list[int],
    max_new_tokens: int,
    clock: Clock,
    eos_ids: frozenset[int],
    dtype: str = "float32",
    drafter_name: str = "model",
    baselines: dict[str, list[int]] | None = None,
) -> GreedyCheck:
    """Speculative vs target-only greedy tokens for every prompt × γ.

    `baselines` (prompt label → target-only greedy tokens) is filled and reused, so checking
    several drafters decodes each prompt's baseline once.
    """
    cache = baselines if baselines is not None else {}
    tol = NEAR_TIE_TOLERANCE.get(dtype, 0.0)
    runs = identical = compared = matching = 0
    mismatches: list[GreedyMismatch] = []
    gen = torch.Generator(device=target.device).manual_seed(0)
    for ctx in prompts:
        if ctx.label not in cache:
            gen_base = baseline_generate(target, ctx.ids, GREEDY, max_new_tokens, clock, eos_ids)
            cache[ctx.label] = gen_base.output_ids
        base_ids = cache[ctx.label]
        for gamma in gammas:
            drafter = make_drafter(draft, GREEDY, gen)
            spec = speculative_generate(
                target,
                drafter,
                ctx.ids,
                fixed_gamma(gamma),
                GREEDY,
                max_new_tokens,
                clock,
                eos_ids,
            )
            runs += 1
            compared += len(base_ids)
            pos = first_difference(base_ids, spec.output_ids)
            if pos is None:
                identical += 1
                matching += len(base_ids)
                continue
            matching += pos
            b_tok = base_ids[pos] if pos < len(base_ids) else -1
            s_tok = spec.output_ids[pos] if pos < len(spec.output_ids) else -1
            margin = math.inf
            if b_tok >= 0 and s_tok >= 0:
                target.reset()
                logits = target.feed(ctx.ids + base_ids[:pos], keep=1)[-1].float()
                margin = float(logits[b_tok] - logits[s_tok])
            mismatches.append(
                GreedyMismatch(
                    ctx.workload, ctx.label, gamma, pos, b_tok, s_tok, margin, abs(margin) <= tol
                )
            )
    return GreedyCheck(
        dtype,
        list(gammas),
        len(prompts),
        runs,
        identical,
        compared,
        matching,
        tol,
        mismatches,
        drafter_name,
    )


# ---------------------------------------------------------------------------------------------
# sampled distribution


def position_tests(
    rounds: list[RoundSample],
    dists: dict[tuple[int, ...], np.ndarray],
    gamma: int,
    rng: np.random.Generator,
) -> list[PositionTest]:
    """Positions 2..γ+1: each emitted token against p at its own prefix, pooled by position."""
    tests = []
    for j in range(2, gamma + 2):
        by_prefix: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for r in rounds:
            if len(r.emitted) >= j:
                by_prefix[r.emitted[: j - 1]].append(r.emitted[j - 1])
        groups = [(dists[pre], np.asarray(toks, int)) for pre, toks in by_prefix.items()]
        tests.append(pit_test(j, groups, rng))
    return tests


@torch.inference_mode()
def check_context(
    target: CachedLM,
    draft: CachedLM | None,
    make_drafter: DrafterFactory,
    ctx: Context,
    params: SamplingParams,
    gamma: int,
    n: int,
    clock: Clock,
    seed: int,
    rule: AcceptanceRule | None = None,
    analytic: bool = True,
) -> ContextCheck:
    """Sample one round n times at `ctx` and test every emitted position against the target.

    `draft` None: a model-free drafter (n-gram); β and the closed forms are then not computed.
    """
    if len(ctx.ids) < 2:
        raise SpecbenchError(f"context {ctx.label} has fewer than 2 tokens; cannot verify there")
    p = context_distribution(target, ctx.ids, params)  # (V,)
    expected = None
    if analytic and draft is not None:
        expected = first_token_expectation(p, context_distribution(draft, ctx.ids, params), rule)
    generator = torch.Generator(device=target.device).manual_seed(seed)
    drafter = make_drafter(draft, params, generator)
    rounds = sample_rounds(target, drafter, ctx.ids, params, gamma, n, clock, generator, rule)
    vocab = p.shape[-1]
    p_np = p.double().cpu().numpy()
    first = np.bincount([r.emitted[0] for r in rounds], minlength=vocab)
    needed = {r.emitted[:-1] for r in rounds if len(r.emitted) >= 2}
    dists = prefix_distributions(target, ctx.ids, needed, params)
    positions = position_tests(rounds, dists, gamma, np.random.default_rng(seed))
    return ContextCheck(
        label=ctx.label,
        workload=ctx.workload,
        context_tokens=len(ctx.ids),
        beta=expected.beta if expected is not None else None,
        p_max=float(p.max()),
        accept_rate=sum(r.n_accepted >= 1 for r in rounds) / n,
        accept_expected=expected.accept_expected if expected is not None else None,
        first=goodness_of_fit(first, p_np),
        positions=positions,
        drafted=float(np.mean([r.drafted for r in rounds])),
        drift_tv_exact=expected.drift_tv if expected is not None else None,
    )
