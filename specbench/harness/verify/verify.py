"""`specbench verify`: is the speculative path lossless for this pair and these sampling settings?

    specbench verify configs/tiny.yaml
    specbench verify configs/tiny.yaml --temperature 1 --contexts 8 --samples 2000 --gamma 2
    specbench verify configs/tiny.yaml --temperature 1 --lossy-epsilon 0.1   # what a lossy rule costs

`run_verify` runs two checks (harness/verify/verify_checks.py; docs/theory.md §1, docs/verify.md) for
every drafter of the config (the primary, the extra drafters, and an n-gram prompt-lookup drafter
when the config has none): greedy identity at T = 0 for every prompt × γ, and at T > 0 the
sampled distribution of every emitted position of one round at real contexts (prompts, and
4/8/… tokens into the target's answer). Bonferroni over every test of the run (`VerifyReport`).

Forwards are memoized by token history (`spec.lm.MemoizedLM`), so n samples cost far fewer model
calls; on a miss the live KV cache is cropped and extended exactly as in decoding.
`memoize=False` runs every forward.

Where the rest lives: the acceptance rules in decoding/acceptance_rules.py, the oracle distributions
and the repeated rounds in decoding/lossless.py, the statistics in analysis/verify/lossless_tests.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from specbench.analysis.verify.verify_results import SamplingCheck, VerifyReport
from specbench.config import DraftSpec, RunConfig
from specbench.data import Prompt, build_context_ids, conversation_messages
from specbench.decoding.acceptance_rules import LossyRule
from specbench.decoding.drafters import Drafter, ModelDrafter, NgramDrafter
from specbench.decoding.generate import baseline_generate
from specbench.decoding.lm import CachedLM, MemoizedLM
from specbench.decoding.timing import Clock
from specbench.errors import SpecbenchError
from specbench.harness.plan.plan import load_prompts
from specbench.harness.transformers.runner import Session, load_session
from specbench.harness.verify.verify_checks import (
    GREEDY,
    Context,
    DrafterFactory,
    check_context,
    greedy_check,
)
from specbench.sampling_params import SamplingParams

CONTEXT_STRIDE = 8  # answer offsets of successive passes over the prompts (plus 4 on odd contexts)


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


def _prompt_contexts(
    cfg: RunConfig,
    sess: Session,
    prompts_by_wl: dict[str, list[Prompt]],
    max_prompts: int | None,
) -> list[Context]:
    """Every prompt's first-turn context, round-robin over workloads so the first contexts cover
    every workload; at most `max_prompts` per workload."""
    queues = [ps[:max_prompts] if max_prompts else ps for ps in prompts_by_wl.values()]
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
    return prompts


VerifiedDrafter = tuple[DraftSpec, CachedLM | None, DrafterFactory]  # a drafter to verify


def _drafters(specs: list[DraftSpec], sess: Session) -> tuple[list[VerifiedDrafter], list[str]]:
    """(spec, draft LM or None, factory) per drafter spec, and the notes they call for."""
    clock, eos = sess.clock, sess.eos_ids
    notes: list[str] = []
    drafters: list[VerifiedDrafter] = []
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
    return drafters, notes


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
    prompts = _prompt_contexts(cfg, sess, prompts_by_wl, options.max_prompts)
    top_p = options.top_p if options.top_p is not None else cfg.sampling.top_p
    top_k = options.top_k if options.top_k is not None else cfg.sampling.top_k
    dtype = str(sess.target_loaded.dtype).removeprefix("torch.")
    drafters, notes = _drafters(specs, sess)
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
