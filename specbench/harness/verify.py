"""`specbench verify`: is the speculative path lossless for this pair and these sampling settings?

    specbench verify configs/tiny.yaml
    specbench verify configs/tiny.yaml --temperature 1 --contexts 8 --samples 2000 --gamma 2
    specbench verify configs/tiny.yaml --temperature 1 --lossy-epsilon 0.1   # what a lossy rule costs

Two checks (docs/theory.md §1, docs/verify.md), for every drafter of the config (the primary, the
extra drafters, and an n-gram prompt-lookup drafter when the config has none):
- greedy (T = 0): speculative tokens must equal target-only greedy tokens, prompt by prompt. Every
  differing prompt is listed with the first differing position and the target's logit margin
  between the two tokens there. In fp32 any difference fails; in fp16/bf16 a flip whose margin is
  within the dtype's rounding tolerance is a near-tie flip: reported, not failed.
- sampling (T > 0): at real contexts (prompts, and 4/8/… tokens into the target's answer), one
  speculative round is run `samples` times from the same state. Every emitted position j of the
  round (1..γ+1, the bonus token included) is tested on the rounds that reached it against the
  target's processed p(· | context, e_1..e_{j−1}), computed by separate target forwards (not the
  round's own verify forward): position 1 by χ² on the token counts, later positions by the pooled
  probability integral transform (analysis/lossless_tests.py). Bonferroni over every test of the run.

Forwards are memoized by token history (a forward is a deterministic function of the tokens before
it), so n samples cost far fewer model calls; on a miss the live KV cache is cropped and extended
exactly as in decoding. `memoize=False` runs every forward.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from transformers import PreTrainedModel

from specbench.analysis.lossless_tests import (
    FitTest,
    PositionTest,
    bonferroni,
    goodness_of_fit,
    pit_test,
)
from specbench.config import DraftSpec, RunConfig
from specbench.data import build_context_ids, conversation_messages
from specbench.errors import SpecbenchError
from specbench.harness.plan import load_prompts
from specbench.harness.runner import Session, load_session
from specbench.spec.acceptance_rules import AcceptanceRule, LossyRule, first_token_distribution
from specbench.spec.drafters import Drafter, ModelDrafter, NgramDrafter
from specbench.spec.generate import (
    baseline_generate,
    fixed_gamma,
    speculative_generate,
    speculative_round,
)
from specbench.spec.lm import CachedLM
from specbench.spec.sampling import SamplingParams, exact_beta, process_logits
from specbench.spec.timing import Clock

__all__ = ["FitTest", "PositionTest", "bonferroni", "goodness_of_fit"]  # re-exported statistics

GREEDY = SamplingParams()
CONTEXT_STRIDE = 8  # answer offsets of successive passes over the prompts (plus 4 on odd contexts)
MEMO_MAX_BYTES = 1 << 30
# Logit margin (units of logits) under which a greedy flip counts as a rounding near-tie.
NEAR_TIE_TOLERANCE = {"float32": 0.0, "float16": 0.1, "bfloat16": 0.5}

# (draft LM or None for a model-free drafter, sampling, generator) → a fresh drafter
DrafterFactory = Callable[[CachedLM | None, SamplingParams, torch.Generator], Drafter]


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
            pos = _first_difference(base_ids, spec.output_ids)
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


@dataclass(frozen=True)
class RoundSample:
    n_accepted: int
    drafted: int
    emitted: tuple[int, ...]  # 1..γ+1 tokens: accepted drafts, then the correction or bonus


def _sample_rounds(
    target: CachedLM,
    draft: CachedLM | None,
    make_drafter: DrafterFactory,
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
        out.append(RoundSample(step.n_accepted, len(step.proposal.tokens), tuple(step.emitted)))
        target.rollback(target.length - base_len)
    return out


PREFIX_BATCH = 64  # prefixes scored per batched forward


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
            ids[b, n_ctx : n_ctx + len(seq)] = torch.tensor(seq, dtype=torch.long)
        # logits at positions n_ctx … n_ctx + width − 1: row k follows the prefix's first k + 1
        logits = target.model(input_ids=ids, use_cache=False, logits_to_keep=width).logits
        logits = logits[:, :, : target.vocab_size]  # (B, width, V)
        rows = process_logits(logits.reshape(-1, logits.shape[-1]), params)
        rows_np = rows.double().cpu().numpy().reshape(len(chunk), width, -1)
        for b, seq in enumerate(chunk):
            for k in range(len(seq)):
                out.setdefault(seq[: k + 1], rows_np[b, k])
    return out


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
    target.reset()
    p = process_logits(target.feed(ctx.ids, keep=1)[-1], params)  # (V,)
    beta = accept_expected = drift = None
    if analytic and draft is not None:
        draft.reset()
        q = process_logits(draft.feed(ctx.ids, keep=1)[-1], params).to(p.device)
        beta = float(exact_beta(p, q))
        eps = rule.epsilon if isinstance(rule, LossyRule) else 0.0
        dist, accept_expected = first_token_distribution(p, q, eps)
        drift = 0.5 * float((dist - p.double()).abs().sum())
    generator = torch.Generator(device=target.device).manual_seed(seed)
    rounds = _sample_rounds(
        target, draft, make_drafter, ctx.ids, params, gamma, n, clock, generator, rule
    )
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
        beta=beta,
        p_max=float(p.max()),
        accept_rate=sum(r.n_accepted >= 1 for r in rounds) / n,
        accept_expected=accept_expected,
        first=goodness_of_fit(first, p_np),
        positions=positions,
        drafted=float(np.mean([r.drafted for r in rounds])),
        drift_tv_exact=drift,
    )


# ---------------------------------------------------------------------------------------------
# the whole check


# The n-gram prompt-lookup drafter verified beside the config's own when it names none: its
# one-hot q takes a path of the acceptance rule (accept with p(y), residual p − one-hot) that a
# draft model never does, and its rounds cost one target forward, so checking it is cheap.
DEFAULT_NGRAM = DraftSpec(method="ngram", name="ngram", prompt_lookup_min=1, prompt_lookup_max=3)


@dataclass(frozen=True)
class VerifyOptions:
    contexts: int = 8
    samples: int = 800
    gamma: int | None = None  # None: greedy at every γ of the config, sampling at min(γ_max, 4)
    temperatures: list[float] | None = None  # None: the config's
    top_p: float | None = None
    top_k: int | None = None
    max_prompts: int | None = None  # per workload
    lossy_epsilon: float | None = None
    significance: float = 0.001  # family-wise, Bonferroni
    seed: int = 0
    memoize: bool = True
    ngram: bool = True  # also verify DEFAULT_NGRAM when the config has no n-gram drafter


@dataclass(frozen=True)
class VerifyReport:
    config_name: str
    target: str
    drafters: list[str]
    rule: str  # "exact" or the lossy rule's label
    lossless_rule: bool
    significance: float
    greedy: list[GreedyCheck]  # one per drafter (empty without T = 0)
    sampling: list[SamplingCheck]  # one per temperature × drafter
    notes: list[str] = field(default_factory=list)

    def _p_values(self) -> list[float]:
        return [p for s in self.sampling for p in s.p_values()]

    @property
    def tests(self) -> int:
        """Sampled-distribution tests run (every context × tested position)."""
        return len(self._p_values())

    @property
    def checks_run(self) -> int:
        """Greedy runs compared plus sampled tests: 0 means nothing was checked."""
        return sum(g.runs for g in self.greedy) + self.tests

    @property
    def min_adjusted_p(self) -> float:
        return bonferroni(self._p_values(), self.significance)[0]

    @property
    def sampling_passed(self) -> bool:
        return bonferroni(self._p_values(), self.significance)[1]

    @property
    def passed(self) -> bool:
        """Lossless: something was checked and every check passed (a check of nothing fails)."""
        greedy_ok = all(g.passed for g in self.greedy)
        return self.checks_run > 0 and greedy_ok and self.sampling_passed


def model_drafter_factory(
    clock: Clock, eos_ids: frozenset[int], logit_noise: float = 0.0
) -> DrafterFactory:
    """Drafters as `specbench run` builds them (same EOS handling and draft weakening)."""

    def make(lm: CachedLM | None, params: SamplingParams, generator: torch.Generator) -> Drafter:
        assert lm is not None, "a model drafter needs its draft LM"
        noise_gen = torch.Generator(device=lm.device).manual_seed(generator.initial_seed() + 1)
        return ModelDrafter(lm, params, clock, generator, eos_ids, logit_noise, noise_gen)

    return make


def ngram_drafter_factory(spec: DraftSpec, clock: Clock) -> DrafterFactory:
    """Prompt lookup as `specbench run` builds it (no model; q one-hot)."""

    def make(_lm: CachedLM | None, _params: SamplingParams, _gen: torch.Generator) -> Drafter:
        return NgramDrafter(spec.prompt_lookup_min, spec.prompt_lookup_max, clock)

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
    temps = options.temperatures if options.temperatures is not None else cfg.sampling.temperatures
    bad = [t for t in temps if not (math.isfinite(t) and t >= 0)]
    if bad:
        raise SpecbenchError(
            f"temperature {bad[0]} is not a finite number >= 0 (0 = greedy); nothing to verify"
        )
    prompts_by_wl = load_prompts(cfg, base_dir)
    sess = session or load_session(cfg)
    specs = list(cfg.drafters)
    if options.ngram and not any(d.method == "ngram" for d in specs):
        specs.append(DEFAULT_NGRAM)
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
    top_p = options.top_p if options.top_p is not None else cfg.sampling.top_p
    top_k = options.top_k if options.top_k is not None else cfg.sampling.top_k
    dtype = str(sess.target_loaded.dtype).removeprefix("torch.")
    notes: list[str] = []
    drafters: list[tuple[DraftSpec, CachedLM | None, DrafterFactory]] = []
    for spec in specs:
        if spec.method == "ngram":
            drafters.append((spec, None, ngram_drafter_factory(spec, clock)))
            continue
        lm = sess.draft_lms.get(spec.label)
        if lm is None:
            raise SpecbenchError(f"drafter {spec.label}: its draft model is not loaded")
        drafters.append((spec, lm, model_drafter_factory(clock, eos, spec.logit_noise)))
        if spec.logit_noise > 0:
            notes.append(
                f"{spec.label}: draft.logit_noise = {spec.logit_noise:g}: the draft's q is random "
                "per step, so β and the closed-form figures are not computed (the sampled test "
                "still applies)"
            )
    if rule is not None:
        notes.append(f"{rule.label}; greedy decoding is unaffected (one-hot p and q)")

    greedy = []
    baselines: dict[str, list[int]] = {}  # shared by the drafters
    if any(t == 0.0 for t in temps):
        gammas = [options.gamma] if options.gamma else list(cfg.gammas)
        for spec, lm, make in drafters:
            say(f"greedy identity, {spec.label}: {len(prompts)} prompts × γ {gammas}")
            greedy.append(
                greedy_check(
                    sess.target_lm,
                    lm,
                    make,
                    prompts,
                    gammas,
                    cfg.max_new_tokens,
                    clock,
                    eos,
                    dtype,
                    spec.label,
                    baselines,
                )
            )

    sampling = []
    hot = [t for t in temps if t > 0]
    if hot:
        gamma = options.gamma or min(max(cfg.gammas), 4)
        target_lm: CachedLM = sess.target_lm
        if options.memoize:
            target_lm = MemoizedLM(sess.target_lm.model, sess.target_lm.vocab_size)
        with torch.inference_mode():
            contexts = pick_contexts(sess.target_lm, prompts, options.contexts, clock, eos)
        for temp in hot:
            params = SamplingParams(temperature=temp, top_k=top_k, top_p=top_p)
            for d, (spec, lm, make) in enumerate(drafters):
                draft_lm = lm
                if lm is not None and options.memoize:
                    draft_lm = MemoizedLM(lm.model, lm.vocab_size)
                checks = []
                for i, ctx in enumerate(contexts):
                    say(
                        f"T={temp:g}, {spec.label}: context {i + 1}/{len(contexts)} "
                        f"({ctx.label}), {options.samples} rounds"
                    )
                    checks.append(
                        check_context(
                            target_lm,
                            draft_lm,
                            make,
                            ctx,
                            params,
                            gamma,
                            options.samples,
                            clock,
                            options.seed + 7919 * i + 104729 * d,
                            rule,
                            analytic=spec.logit_noise == 0,
                        )
                    )
                sampling.append(
                    SamplingCheck(temp, top_p, top_k, gamma, options.samples, checks, spec.label)
                )
    return VerifyReport(
        config_name=cfg.name,
        target=cfg.target.model,
        drafters=[spec.label for spec, _, _ in drafters],
        rule=rule.label if rule is not None else "exact",
        lossless_rule=rule is None,
        significance=options.significance,
        greedy=greedy,
        sampling=sampling,
        notes=notes,
    )
