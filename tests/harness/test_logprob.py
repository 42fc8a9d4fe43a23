"""The target's mean log-probability of its own answer (docs/theory.md §13), checked against a
fresh teacher-forced forward of the target over prompt + answer, processed in numpy/scipy (not
the loops' code path: no cache, no `process_logits`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import log_softmax

from specbench.decoding.drafters import ModelDrafter
from specbench.decoding.generate import (
    Generation,
    baseline_generate,
    fixed_gamma,
    speculative_generate,
)
from specbench.sampling_params import SamplingParams
from tests.harness.test_speculative import CLOCK, lms, tiny_prompts


def oracle_logprobs(
    pair, prompt: list[int], answer: list[int], temperature: float, top_k: int
) -> np.ndarray:  # type: ignore[no-untyped-def]
    """log p(answer_i | prompt, answer_<i) from one uncached forward. temperature 0: the raw
    softmax (the greedy figure); otherwise logits / T, top-k kept, renormalised."""
    ids = torch.tensor([prompt + answer])
    with torch.inference_mode():
        logits = pair.target.model(input_ids=ids).logits[0].double().numpy()
    v = pair.vocab.real_vocab_size
    rows = logits[len(prompt) - 1 : len(prompt) + len(answer) - 1, :v]
    if temperature > 0:
        rows = rows / temperature
        if top_k:
            kth = np.sort(rows, axis=-1)[:, -top_k][:, None]
            rows = np.where(rows >= kth, rows, -np.inf)
    logp = log_softmax(rows, axis=-1)
    return logp[np.arange(len(answer)), answer]


def generations(pair, ids: list[int], params: SamplingParams, seed: int) -> list[Generation]:  # type: ignore[no-untyped-def]
    target, draft = lms(pair)
    out = [
        baseline_generate(
            target,
            ids,
            params,
            24,
            CLOCK,
            pair.eos_ids,
            generator=torch.Generator().manual_seed(seed),
        )
    ]
    for gamma in (1, 4):
        gen = torch.Generator().manual_seed(seed)
        out.append(
            speculative_generate(
                target, ModelDrafter(draft, params, CLOCK, gen, pair.eos_ids), ids,
                fixed_gamma(gamma), params, 24, CLOCK, pair.eos_ids, generator=gen,
            )
        )  # fmt: skip
    return out


@torch.inference_mode()
def test_greedy_logprob_is_the_mean_log_max_probability(tiny_pair) -> None:  # type: ignore[no-untyped-def]
    for ids in tiny_prompts(tiny_pair.target.tokenizer)[:3]:
        for g in generations(tiny_pair, ids, SamplingParams(), seed=0):
            ref = oracle_logprobs(tiny_pair, ids, g.output_ids, 0.0, 0)
            # greedy: every emitted token is the argmax, so its log p is the log max probability
            ids_t = torch.tensor([ids + g.output_ids])
            logits = tiny_pair.target.model(input_ids=ids_t).logits[0].double().numpy()
            rows = logits[len(ids) - 1 : -1, : tiny_pair.vocab.real_vocab_size]
            log_max = (log_softmax(rows, axis=-1)).max(axis=-1)
            assert np.allclose(ref, log_max, atol=1e-9)
            assert g.target_mean_logprob is not None
            assert g.target_mean_logprob == pytest.approx(float(log_max.mean()), abs=1e-4)
            assert g.target_mean_logprob < 0  # the raw softmax, not the one-hot processed p


@torch.inference_mode()
@pytest.mark.parametrize(("temperature", "top_k"), [(1.0, 0), (0.7, 20)])
def test_sampled_logprob_matches_teacher_forced_target(
    tiny_pair, temperature: float, top_k: int
) -> None:  # type: ignore[no-untyped-def]
    """Baseline and speculative (accepted drafts, corrections, bonus tokens): every emitted
    token's p under the processed target distribution, averaged over the answer."""
    params = SamplingParams(temperature=temperature, top_k=top_k)
    prompts = tiny_prompts(tiny_pair.target.tokenizer)
    rejected = 0
    for seed, ids in enumerate(prompts[:3]):
        for g in generations(tiny_pair, ids, params, seed):
            ref = oracle_logprobs(tiny_pair, ids, g.output_ids, temperature, top_k)
            assert np.isfinite(ref).all()
            assert g.target_mean_logprob == pytest.approx(float(ref.mean()), abs=1e-4)
            if g.rounds is not None:
                rejected += sum(g.rounds.drafted) - sum(g.rounds.accepted)
    assert rejected > 0  # correction tokens (drawn from the residual) were among those checked


@torch.inference_mode()
def test_logprob_follows_stop_truncation(tiny_pair) -> None:  # type: ignore[no-untyped-def]
    """A stop on EOS mid-round keeps only the emitted prefix: the mean covers exactly it."""
    target, draft = lms(tiny_pair)
    ids = tiny_prompts(tiny_pair.target.tokenizer)[0]
    params = SamplingParams(temperature=1.0)

    def run(eos_ids: frozenset[int]) -> Generation:
        gen = torch.Generator().manual_seed(3)
        return speculative_generate(
            target, ModelDrafter(draft, params, CLOCK, gen), ids, fixed_gamma(6), params, 30,
            CLOCK, eos_ids, generator=gen,
        )  # fmt: skip

    free = run(frozenset())
    # an EOS at a token that was not the last of its round: the round is cut after it
    ends = set(np.cumsum([1, *free.rounds.emitted]) - 1) if free.rounds else set()
    cut = next(
        i for i, t in enumerate(free.output_ids)
        if i >= 3 and i not in ends and t not in free.output_ids[:i]
    )  # fmt: skip
    eos = free.output_ids[cut]
    spec = run(frozenset({eos}))
    assert spec.output_ids == free.output_ids[: cut + 1]
    assert spec.output_ids[-1] == eos and spec.stop_reason == "eos"
    want = oracle_logprobs(tiny_pair, ids, spec.output_ids, 1.0, 0).mean()
    assert spec.target_mean_logprob == pytest.approx(float(want), abs=1e-4)
