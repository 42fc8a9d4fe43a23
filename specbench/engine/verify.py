"""`specbench verify`: is the speculative path lossless for this pair and these sampling settings?

    specbench verify configs/tiny.yaml
    specbench verify configs/tiny.yaml --temperature 1 --contexts 8 --samples 2000 --gamma 2
    specbench verify configs/tiny.yaml --temperature 1 --lossy-epsilon 0.1   # what a lossy rule costs

Two checks (THEORY §1):
- greedy (T = 0): speculative tokens must equal target-only greedy tokens, prompt by prompt. Every
  differing prompt is listed with the first differing position and the target's logit margin
  between the two tokens there. In fp32 any difference fails; in fp16/bf16 a flip whose margin is
  within the dtype's rounding tolerance is a near-tie flip: reported, not failed.
- sampling (T > 0): at real contexts (prompts, and 4/8/… tokens into the target's answer), one
  speculative round is run `samples` times from the same state. Its first emitted token must follow
  the target's processed distribution p exactly: χ² goodness of fit (bins = tokens with expected
  count ≥ 5, the rest pooled), the empirical TV distance and its sampling-error bound
  E[TV̂] ≤ ½ Σ √(p(1 − p)/n). In the rounds that accepted y_1 = x (x the most frequent accepted
  first token) the second emitted token must follow p(· | context, x): that exercises position 2
  (or the bonus token at γ = 1). Multiple testing: Bonferroni over every χ² test of the run.

Forwards are memoized by token history (a forward is a deterministic function of the tokens before
it), so n samples cost far fewer model calls; on a miss the live KV cache is cropped and extended
exactly as in decoding. `memoize=False` runs every forward.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from scipy import stats
from transformers import PreTrainedModel

from specbench.config import RunConfig
from specbench.data import build_context_ids, conversation_messages
from specbench.engine.acceptance_rules import AcceptanceRule, LossyRule, first_token_distribution
from specbench.engine.drafters import Drafter, ModelDrafter
from specbench.engine.generate import (
    baseline_generate,
    fixed_gamma,
    speculative_generate,
    speculative_round,
)
from specbench.engine.lm import CachedLM
from specbench.engine.runner import Session, load_prompts, load_session
from specbench.errors import SpecbenchError
from specbench.sampling import SamplingParams, exact_beta, process_logits
from specbench.timing import Clock

GREEDY = SamplingParams()
MIN_EXPECTED = 5.0  # χ² bins: tokens with at least this expected count; the rest pooled
MIN_SECOND_SAMPLES = 200  # second-token test only when the conditioned sample is this large
CONTEXT_STRIDE = 8  # answer offsets of successive passes over the prompts (plus 4 on odd contexts)
MEMO_MAX_BYTES = 1 << 30
# Logit margin (units of logits) under which a greedy flip counts as a rounding near-tie.
NEAR_TIE_TOLERANCE = {"float32": 0.0, "float16": 0.1, "bfloat16": 0.5}

DrafterFactory = Callable[[CachedLM, SamplingParams, torch.Generator], Drafter]


# ---------------------------------------------------------------------------------------------
# statistics (pure numpy)


@dataclass(frozen=True)
class FitTest:
    """A χ² goodness-of-fit test of n sampled tokens against a distribution p."""

    n: int
    chi2: float
    dof: int  # 0: p puts (almost) all its mass on one bin, nothing to test
    p_value: float
    tv: float  # ½ Σ |count/n − p|
    tv_bound: float  # ½ Σ √(p(1 − p)/n) ≥ E[TV] under exact sampling
    impossible: int  # samples of tokens with p = 0 (fail outright)


def goodness_of_fit(
    counts: np.ndarray, p: np.ndarray, min_expected: float = MIN_EXPECTED
) -> FitTest:
    """χ² test of observed token counts (V,) against probabilities p (V,).

    Bins: every token with expected count n·p ≥ `min_expected`, plus one bin pooling the rest
    (merged into the smallest regular bin when its own expected count is below `min_expected`).
    One bin left means dof 0: p is (almost) deterministic there and nothing is tested. A sampled
    token with p = 0 makes the p-value 0.
    """
    counts = np.asarray(counts, dtype=float)
    p = np.asarray(p, dtype=float)
    p = p / p.sum()
    n = int(counts.sum())
    if n == 0:
        return FitTest(0, math.nan, 0, 1.0, math.nan, math.nan, 0)
    impossible = int(counts[p <= 0].sum())
    tv = 0.5 * float(np.abs(counts / n - p).sum())
    tv_bound = 0.5 * float(np.sqrt(p * (1 - p) / n).sum())
    expected = p * n
    big = expected >= min_expected
    obs = list(counts[big])
    exp = list(expected[big])
    rest_exp, rest_obs = float(expected[~big].sum()), float(counts[~big].sum())
    if rest_exp >= min_expected or not obs:
        obs.append(rest_obs)
        exp.append(rest_exp)
    elif rest_exp > 0:  # a too-small pooled bin joins the smallest regular bin
        j = int(np.argmin(exp))
        obs[j] += rest_obs
        exp[j] += rest_exp
    dof = len(obs) - 1
    if impossible:
        return FitTest(n, math.inf, max(dof, 1), 0.0, tv, tv_bound, impossible)
    if dof < 1:
        return FitTest(n, 0.0, 0, 1.0, tv, tv_bound, 0)
    res = stats.chisquare(np.asarray(obs), np.asarray(exp))
    return FitTest(n, float(res.statistic), dof, float(res.pvalue), tv, tv_bound, 0)


def bonferroni(p_values: list[float], significance: float) -> tuple[float, bool]:
    """(smallest Bonferroni-adjusted p-value, whether every test passes at `significance`)."""
    if not p_values:
        return 1.0, True
    adjusted = min(1.0, min(p_values) * len(p_values))
    return adjusted, adjusted >= significance


# ---------------------------------------------------------------------------------------------
# memoized forwards


class MemoizedLM(CachedLM):
    """A `CachedLM` whose `feed` results are memoized by (token history, tokens, keep).

    `history` is what the cache logically holds; the real KV cache is synced lazily on a miss:
    cropped to the longest common prefix with `history`, then extended with the rest.
    """

    def __init__(
        self, model: PreTrainedModel, vocab_size: int, max_bytes: int = MEMO_MAX_BYTES
    ) -> None:
        super().__init__(model, vocab_size)
        self.history: list[int] = []
        self._real: list[int] = []  # tokens in the real KV cache
        self._memo: dict[tuple[tuple[int, ...], tuple[int, ...], int], torch.Tensor] = {}
        self._bytes = 0
        self.max_bytes = max_bytes
        self.hits = self.misses = 0

    def reset(self) -> None:
        self.history = []
        self.length = 0

    def _sync(self) -> None:
        common = 0
        for a, b in zip(self._real, self.history, strict=False):
            if a != b:
                break
            common += 1
        if common == 0 and self._real:
            super().reset()
        elif common < len(self._real):
            super().rollback(len(self._real) - common)
        self._real = self._real[:common]
        if len(self.history) > common:
            super().feed(self.history[common:], keep=1)
            self._real = list(self.history)

    def feed(self, token_ids: list[int], keep: int = 1) -> torch.Tensor:
        key = (tuple(self.history), tuple(token_ids), keep)
        logits = self._memo.get(key)
        if logits is None:
            self.misses += 1
            self._sync()
            logits = super().feed(token_ids, keep)
            self._real.extend(token_ids)
            size = logits.numel() * logits.element_size()
            if self._bytes + size <= self.max_bytes:
                self._memo[key] = logits
                self._bytes += size
        else:
            self.hits += 1
        self.history.extend(token_ids)
        self.length = len(self.history)
        return logits

    def rollback(self, n_positions: int) -> None:
        if n_positions > 0:
            del self.history[-n_positions:]
            self.length = len(self.history)


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


@dataclass(frozen=True)
class Context:
    label: str  # "<prompt id>+<answer offset>"
    workload: str
    ids: list[int]


def _first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@torch.inference_mode()
def greedy_check(
    target: CachedLM,
    draft: CachedLM,
    make_drafter: DrafterFactory,
    prompts: list[Context],
    gammas: list[int],
    max_new_tokens: int,
    clock: Clock,
    eos_ids: frozenset[int],
    dtype: str = "float32",
) -> GreedyCheck:
    """Speculative vs target-only greedy tokens for every prompt × γ."""
    tol = NEAR_TIE_TOLERANCE.get(dtype, 0.0)
    runs = identical = compared = matching = 0
    mismatches: list[GreedyMismatch] = []
    gen = torch.Generator(device=target.device).manual_seed(0)
    for ctx in prompts:
        base = baseline_generate(target, ctx.ids, GREEDY, max_new_tokens, clock, eos_ids)
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
            compared += len(base.output_ids)
            pos = _first_difference(base.output_ids, spec.output_ids)
            if pos is None:
                identical += 1
                matching += len(base.output_ids)
                continue
            matching += pos
            b_tok = base.output_ids[pos] if pos < len(base.output_ids) else -1
            s_tok = spec.output_ids[pos] if pos < len(spec.output_ids) else -1
            margin = math.inf
            if b_tok >= 0 and s_tok >= 0:
                target.reset()
                logits = target.feed(ctx.ids + base.output_ids[:pos], keep=1)[-1].float()
                margin = float(logits[b_tok] - logits[s_tok])
            mismatches.append(
                GreedyMismatch(
                    ctx.workload, ctx.label, gamma, pos, b_tok, s_tok, margin, abs(margin) <= tol
                )
            )
    return GreedyCheck(
        dtype, list(gammas), len(prompts), runs, identical, compared, matching, tol, mismatches
    )


# ---------------------------------------------------------------------------------------------
# sampled distribution


@dataclass(frozen=True)
class ContextCheck:
    label: str
    workload: str
    context_tokens: int
    beta: float | None  # exact P(y_1 accepted) under the exact rule; None with a noisy draft
    p_max: float  # the target's top probability at the context
    accept_rate: float  # measured P(y_1 accepted)
    accept_expected: float | None  # β (exact rule) or the rule's closed form (lossy)
    first: FitTest  # first emitted token vs p(· | context)
    second: FitTest | None  # second emitted token given y_1 = second_given accepted
    second_given: int | None
    drift_tv_exact: float | None  # TV(rule's first-token distribution, p), closed form


@dataclass(frozen=True)
class SamplingCheck:
    temperature: float
    top_p: float
    top_k: int
    gamma: int
    samples: int
    contexts: list[ContextCheck]

    def p_values(self) -> list[float]:
        """Every non-degenerate test's p-value (those with dof ≥ 1)."""
        out = []
        for c in self.contexts:
            for t in (c.first, c.second):
                if t is not None and t.dof >= 1:
                    out.append(t.p_value)
        return out

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


def _sample_round_heads(
    target: CachedLM,
    draft: CachedLM,
    make_drafter: DrafterFactory,
    context: list[int],
    params: SamplingParams,
    gamma: int,
    n: int,
    clock: Clock,
    generator: torch.Generator,
    rule: AcceptanceRule | None,
) -> list[tuple[int, list[int]]]:
    """n × (accepted count, first ≤ 2 emitted tokens) of one round from the same context."""
    prefix, last = context[:-1], context[-1]
    drafter = make_drafter(draft, params, generator)
    target.reset()
    target.feed(prefix, keep=1)
    base_len = target.length
    out = []
    for _ in range(n):
        drafter.start(prefix, last)
        step = speculative_round(
            target, drafter, last, gamma, params, clock, generator, accept_rule=rule
        )
        out.append((step.n_accepted, step.emitted[:2]))
        target.rollback(target.length - base_len)
    return out


@torch.inference_mode()
def check_context(
    target: CachedLM,
    draft: CachedLM,
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
    """Sample one round's head n times at `ctx` and test it against the target's distribution."""
    if len(ctx.ids) < 2:
        raise SpecbenchError(f"context {ctx.label} has fewer than 2 tokens; cannot verify there")
    target.reset()
    p = process_logits(target.feed(ctx.ids, keep=1)[-1], params)  # (V,)
    beta = accept_expected = drift = None
    if analytic:
        draft.reset()
        q = process_logits(draft.feed(ctx.ids, keep=1)[-1], params).to(p.device)
        beta = float(exact_beta(p, q))
        eps = rule.epsilon if isinstance(rule, LossyRule) else 0.0
        dist, accept_expected = first_token_distribution(p, q, eps)
        drift = 0.5 * float((dist - p.double()).abs().sum())
    generator = torch.Generator(device=target.device).manual_seed(seed)
    heads = _sample_round_heads(
        target, draft, make_drafter, ctx.ids, params, gamma, n, clock, generator, rule
    )
    vocab = p.shape[-1]
    p_np = p.double().cpu().numpy()
    first = np.bincount([h[1][0] for h in heads], minlength=vocab)
    accepted_first = [h[1] for h in heads if h[0] >= 1]
    second = None
    given = None
    if accepted_first:
        given, _ = Counter(t[0] for t in accepted_first).most_common(1)[0]
        seconds = [t[1] for t in accepted_first if t[0] == given]
        if len(seconds) >= MIN_SECOND_SAMPLES:
            target.reset()
            p2 = process_logits(target.feed([*ctx.ids, given], keep=1)[-1], params)
            second = goodness_of_fit(
                np.bincount(seconds, minlength=vocab), p2.double().cpu().numpy()
            )
    return ContextCheck(
        label=ctx.label,
        workload=ctx.workload,
        context_tokens=len(ctx.ids),
        beta=beta,
        p_max=float(p.max()),
        accept_rate=sum(h[0] >= 1 for h in heads) / n,
        accept_expected=accept_expected,
        first=goodness_of_fit(first, p_np),
        second=second,
        second_given=given if second is not None else None,
        drift_tv_exact=drift,
    )


# ---------------------------------------------------------------------------------------------
# the whole check


@dataclass(frozen=True)
class VerifyOptions:
    contexts: int = 8
    samples: int = 2000
    gamma: int | None = None  # None: greedy at every γ of the config, sampling at min(γ_max, 4)
    temperatures: list[float] | None = None  # None: the config's
    top_p: float | None = None
    top_k: int | None = None
    max_prompts: int | None = None  # per workload
    lossy_epsilon: float | None = None
    significance: float = 0.001  # family-wise, Bonferroni
    seed: int = 0
    memoize: bool = True


@dataclass(frozen=True)
class VerifyReport:
    config_name: str
    target: str
    draft: str
    rule: str  # "exact" or the lossy rule's label
    lossless_rule: bool
    significance: float
    greedy: GreedyCheck | None
    sampling: list[SamplingCheck]
    notes: list[str] = field(default_factory=list)

    @property
    def tests(self) -> int:
        return sum(len(s.p_values()) for s in self.sampling)

    @property
    def min_adjusted_p(self) -> float:
        return bonferroni([p for s in self.sampling for p in s.p_values()], self.significance)[0]

    @property
    def sampling_passed(self) -> bool:
        return bonferroni([p for s in self.sampling for p in s.p_values()], self.significance)[1]

    @property
    def passed(self) -> bool:
        return (self.greedy is None or self.greedy.passed) and self.sampling_passed


def model_drafter_factory(
    clock: Clock, eos_ids: frozenset[int], logit_noise: float = 0.0
) -> DrafterFactory:
    """Drafters as `specbench run` builds them (same EOS handling and draft weakening)."""

    def make(lm: CachedLM, params: SamplingParams, generator: torch.Generator) -> Drafter:
        noise_gen = torch.Generator(device=lm.device).manual_seed(generator.initial_seed() + 1)
        return ModelDrafter(lm, params, clock, generator, eos_ids, logit_noise, noise_gen)

    return make


def pick_contexts(
    target: CachedLM,
    prompts: list[Context],
    n: int,
    clock: Clock,
    eos_ids: frozenset[int],
) -> list[Context]:
    """n contexts: prompt i mod P, extended by 8·(i // P) + 4·(i mod 2) tokens of the target's
    greedy answer (the start of an answer and points inside it)."""
    out = []
    for i in range(n):
        src = prompts[i % len(prompts)]
        offset = CONTEXT_STRIDE * (i // len(prompts)) + (CONTEXT_STRIDE // 2) * (i % 2)
        ids = list(src.ids)
        if offset:
            gen = baseline_generate(target, ids, GREEDY, offset, clock, eos_ids)
            ids += gen.output_ids
        out.append(Context(f"{src.label}+{len(ids) - len(src.ids)}", src.workload, ids))
    return out


def run_verify(
    cfg: RunConfig,
    options: VerifyOptions,
    base_dir: Path | None = None,
    session: Session | None = None,
    progress: Callable[[str], None] | None = None,
) -> VerifyReport:
    """Load the pair (unless a runner `Session` is given), pick prompts and contexts, check."""
    say = progress or (lambda _msg: None)
    rule = LossyRule(options.lossy_epsilon) if options.lossy_epsilon else None
    prompts_by_wl = load_prompts(cfg, base_dir)
    sess = session or load_session(cfg)
    real_draft = sess.draft_lms.get(cfg.draft.label)
    if cfg.draft.method != "model" or real_draft is None:
        raise SpecbenchError("verify checks a draft model: set draft.method to 'model'")
    clock, eos = sess.clock, sess.eos_ids
    # round-robin over workloads so the first contexts cover every workload
    queues = [
        ps[: options.max_prompts] if options.max_prompts else ps for ps in prompts_by_wl.values()
    ]
    prompts: list[Context] = []
    for i in range(max(len(q) for q in queues)):
        for q in queues:
            if i < len(q):
                pr = q[i]
                ids, _ = build_context_ids(
                    sess.tokenizer,
                    conversation_messages(pr, [], 0),
                    cfg.chat_template,
                    sess.max_context,
                )
                prompts.append(Context(pr.id, pr.workload, ids))
    temps = options.temperatures if options.temperatures is not None else cfg.sampling.temperatures
    top_p = options.top_p if options.top_p is not None else cfg.sampling.top_p
    top_k = options.top_k if options.top_k is not None else cfg.sampling.top_k
    noise = cfg.draft.logit_noise
    make_drafter = model_drafter_factory(clock, eos, noise)
    dtype = str(sess.target_loaded.dtype).removeprefix("torch.")
    notes: list[str] = []
    if noise > 0:
        notes.append(
            f"draft.logit_noise = {noise:g}: the draft's q is random per step, so β and the "
            "closed-form figures are not computed (the sampled test still applies)"
        )
    if rule is not None:
        notes.append(f"{rule.label}; greedy decoding is unaffected (one-hot p and q)")
    if cfg.extra_drafters:
        notes.append(
            f"only the primary draft ({cfg.draft.label}) is verified; the extra drafters share "
            "the same acceptance code"
        )

    greedy = None
    if any(t == 0.0 for t in temps):
        gammas = [options.gamma] if options.gamma else list(cfg.gammas)
        say(f"greedy identity: {len(prompts)} prompts × γ {gammas}")
        greedy = greedy_check(
            sess.target_lm,
            real_draft,
            make_drafter,
            prompts,
            gammas,
            cfg.max_new_tokens,
            clock,
            eos,
            dtype,
        )

    sampling = []
    hot = [t for t in temps if t > 0]
    if hot:
        gamma = options.gamma or min(max(cfg.gammas), 4)
        target_lm: CachedLM = sess.target_lm
        draft_lm: CachedLM = real_draft
        if options.memoize:
            target_lm = MemoizedLM(sess.target_lm.model, sess.target_lm.vocab_size)
            draft_lm = MemoizedLM(real_draft.model, real_draft.vocab_size)
        with torch.inference_mode():
            contexts = pick_contexts(sess.target_lm, prompts, options.contexts, clock, eos)
        for temp in hot:
            params = SamplingParams(temperature=temp, top_k=top_k, top_p=top_p)
            checks = []
            for i, ctx in enumerate(contexts):
                say(
                    f"T={temp:g}: context {i + 1}/{len(contexts)} ({ctx.label}), {options.samples} rounds"
                )
                checks.append(
                    check_context(
                        target_lm,
                        draft_lm,
                        make_drafter,
                        ctx,
                        params,
                        gamma,
                        options.samples,
                        clock,
                        options.seed + 7919 * i,
                        rule,
                        analytic=noise == 0,
                    )
                )
            sampling.append(SamplingCheck(temp, top_p, top_k, gamma, options.samples, checks))
    return VerifyReport(
        config_name=cfg.name,
        target=cfg.target.model,
        draft=cfg.draft.model,
        rule=rule.label if rule is not None else "exact",
        lossless_rule=rule is None,
        significance=options.significance,
        greedy=greedy,
        sampling=sampling,
        notes=notes,
    )
