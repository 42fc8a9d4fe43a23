"""The two checks of `specbench verify` (docs/theory.md §1, docs/verify.md), and their results.

- `greedy_check` (T = 0): speculative tokens must equal target-only greedy tokens, prompt by
  prompt. Every differing prompt is listed with the first differing position and the target's
  logit margin between the two tokens there. In fp32 any difference fails; in fp16/bf16 a flip
  whose margin is within the dtype's rounding tolerance is a near-tie flip: reported, not failed.
- `check_context` (T > 0): one speculative round is run n times from the same state at a context
  (spec/lossless.py). Every emitted position j of the round (1..γ+1, the bonus token included) is
  tested on the rounds that reached it against the target's processed p(· | context, e_1..e_{j−1})
  from separate target forwards: position 1 by χ² on the token counts, later positions by the
  pooled probability integral transform (analysis/lossless_tests.py).

harness/verify.py picks the contexts and drafters and runs these for the whole config.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from specbench.analysis.lossless_tests import FitTest, PositionTest, goodness_of_fit, pit_test
from specbench.errors import SpecbenchError
from specbench.sampling_params import SamplingParams
from specbench.spec.acceptance_rules import AcceptanceRule
from specbench.spec.drafters import Drafter
from specbench.spec.generate import baseline_generate, fixed_gamma, speculative_generate
from specbench.spec.lm import CachedLM
from specbench.spec.lossless import (
    RoundSample,
    context_distribution,
    first_token_expectation,
    prefix_distributions,
    sample_rounds,
)
from specbench.spec.timing import Clock

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


@dataclass(frozen=True)
class GreedyMismatch:
    workload: str
    prompt_id: str
    gamma: int
    position: int  # first differing output position (0-based)
    baseline_token: int
    speculative_token: int
    logit_margin: float  # target logit of the baseline token minus that of the speculative token
    near_tie: bool


@dataclass(frozen=True)
class GreedyCheck:
    dtype: str
    gammas: list[int]
    prompts: int
    runs: int  # prompts × γ
    identical_runs: int
    tokens_compared: int  # baseline tokens over every run
    tokens_matching: int  # tokens before the first difference
    near_tie_tolerance: float
    mismatches: list[GreedyMismatch]
    drafter: str = "model"

    @property
    def identity_rate(self) -> float:
        return self.identical_runs / self.runs if self.runs else math.nan

    @property
    def token_identity_rate(self) -> float:
        return self.tokens_matching / self.tokens_compared if self.tokens_compared else math.nan

    @property
    def near_tie_flips(self) -> int:
        return sum(m.near_tie for m in self.mismatches)

    @property
    def passed(self) -> bool:
        return all(m.near_tie for m in self.mismatches)


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


@dataclass(frozen=True)
class ContextCheck:
    label: str
    workload: str
    context_tokens: int
    beta: float | None  # exact P(y_1 accepted) under the exact rule; None: noisy or n-gram draft
    p_max: float  # the target's top probability at the context
    accept_rate: float  # measured P(y_1 accepted)
    accept_expected: float | None  # β (exact rule) or the rule's closed form (lossy)
    first: FitTest  # first emitted token vs p(· | context)
    positions: list[PositionTest]  # emitted positions 2..γ+1 (γ+1: the bonus token)
    drafted: float  # mean tokens drafted per round (an n-gram drafter may find nothing)
    drift_tv_exact: float | None  # TV(rule's first-token distribution, p), closed form

    def p_values(self) -> list[float]:
        """This context's tests: position 1 (when not degenerate) and every tested later one."""
        out = [self.first.p_value] if self.first.dof >= 1 else []
        return out + [t.p_value for t in self.positions if t.tested]


@dataclass(frozen=True)
class SamplingCheck:
    temperature: float
    top_p: float
    top_k: int
    gamma: int
    samples: int
    contexts: list[ContextCheck]
    drafter: str = "model"

    def p_values(self) -> list[float]:
        """Every test's p-value, all contexts and positions."""
        return [p for c in self.contexts for p in c.p_values()]

    def summary(self) -> dict[str, float | None]:
        """Means over contexts: acceptance of y_1 (measured, expected, exact-rule β), the extra
        acceptance over β, the measured TV of the first token and its bound, the closed-form drift."""

        def mean(values: list[float | None]) -> float | None:
            vals = [v for v in values if v is not None and math.isfinite(v)]
            return float(np.mean(vals)) if vals else None

        cs = self.contexts
        betas = [c.beta for c in cs]
        return {
            "accept_rate": mean([c.accept_rate for c in cs]),
            "accept_expected": mean([c.accept_expected for c in cs]),
            "beta": mean(betas),
            "extra_acceptance_measured": mean(
                [c.accept_rate - c.beta if c.beta is not None else None for c in cs]
            ),
            "extra_acceptance_exact": mean(
                [
                    c.accept_expected - c.beta
                    if c.beta is not None and c.accept_expected is not None
                    else None
                    for c in cs
                ]
            ),
            "tv_measured": mean([c.first.tv for c in cs]),
            "tv_bound": mean([c.first.tv_bound for c in cs]),
            "drift_tv_exact": mean([c.drift_tv_exact for c in cs]),
        }


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
