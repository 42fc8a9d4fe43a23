"""The speculative loop on the shipped tiny pair: greedy identity, cache rollback, losslessness
of the sampled distribution, and stop handling."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from specbench.config import DatasetSpec, WorkloadSpec
from specbench.data import load_workload
from specbench.decoding.drafters import ModelDrafter
from specbench.decoding.generate import (
    baseline_generate,
    fixed_gamma,
    speculative_generate,
    speculative_round,
)
from specbench.decoding.lm import CachedLM
from specbench.decoding.rounds import Rounds
from specbench.decoding.sampling import process_logits
from specbench.decoding.timing import Clock
from specbench.harness.transformers.runner import make_stop_check
from specbench.sampling_params import SamplingParams

CLOCK = Clock(torch.device("cpu"))
GREEDY = SamplingParams()


def tiny_prompts(tokenizer) -> list[list[int]]:  # type: ignore[no-untyped-def]
    ids = []
    for name in ("tiny_code", "tiny_prose", "tiny_structured", "tiny_encoded"):
        wl = WorkloadSpec(name=name, dataset=DatasetSpec(name=name))
        for p in load_workload(wl, seed=0):
            ids.append(tokenizer(p.turns[0])["input_ids"])
    return ids


def lms(pair, same: bool = False) -> tuple[CachedLM, CachedLM]:  # type: ignore[no-untyped-def]
    v = pair.vocab.real_vocab_size
    return CachedLM(pair.target.model, v), CachedLM((pair.target if same else pair.draft).model, v)


@torch.inference_mode()
@pytest.mark.long  # a minute or more: make test-long (CI runs it)
def test_greedy_output_identical_to_baseline_for_every_prompt_and_gamma(tiny_pair) -> None:  # type: ignore[no-untyped-def]
    prompts = tiny_prompts(tiny_pair.target.tokenizer)
    assert len(prompts) >= 60
    target, draft = lms(tiny_pair)
    mismatches = []
    accepted_total = 0
    for ids in prompts:
        base = baseline_generate(target, ids, GREEDY, 12, CLOCK, tiny_pair.eos_ids)
        for gamma in range(1, 9):
            drafter = ModelDrafter(draft, GREEDY, CLOCK, eos_ids=tiny_pair.eos_ids)
            spec = speculative_generate(
                target, drafter, ids, fixed_gamma(gamma), GREEDY, 12, CLOCK, tiny_pair.eos_ids
            )
            if spec.output_ids != base.output_ids:
                mismatches.append((ids[:5], gamma))
            assert spec.rounds is not None
            accepted_total += sum(spec.rounds.accepted)
            assert len(spec.output_ids) == 1 + sum(spec.rounds.emitted)
    assert mismatches == []
    assert accepted_total > 0  # the draft is useful, so acceptance paths were exercised


@torch.inference_mode()
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_draft_equal_to_target_accepts_everything(tiny_pair, temperature: float) -> None:  # type: ignore[no-untyped-def]
    target, draft = lms(tiny_pair, same=True)
    params = SamplingParams(temperature=temperature)
    ids = tiny_prompts(tiny_pair.target.tokenizer)[0]
    gen = torch.Generator().manual_seed(1)
    spec = speculative_generate(
        target, ModelDrafter(draft, params, CLOCK, gen), ids, fixed_gamma(4), params, 40, CLOCK,
        generator=gen,
    )  # fmt: skip
    r = spec.rounds
    assert r is not None
    assert r.accepted == r.drafted
    assert all(b == pytest.approx(1.0, abs=1e-4) for bs in r.beta for b in bs)


@torch.inference_mode()
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_caches_hold_exactly_the_accepted_sequence_after_every_round(
    tiny_pair, temperature: float
) -> None:  # type: ignore[no-untyped-def]
    target, draft = lms(tiny_pair)
    params = SamplingParams(temperature=temperature)
    ids = tiny_prompts(tiny_pair.target.tokenizer)[3]
    gen = torch.Generator().manual_seed(7)
    drafter = ModelDrafter(draft, params, CLOCK, gen)
    out_ref: list[list[int]] = []
    checked = []

    def remember(out: list[int]) -> None:
        if not out_ref:
            out_ref.append(out)  # the loop's own output list, updated in place
        return None

    def check_then_gamma(rounds: Rounds) -> int:
        if out_ref:
            seq = ids + out_ref[0]
            # target: everything but the last emitted token; draft: that minus its pending tokens
            assert target.length == target.cache_length() == len(seq) - 1
            assert draft.length == draft.cache_length() == len(seq) - len(drafter.pending)
            assert drafter.pending == seq[len(seq) - len(drafter.pending) :]
            # the cached keys equal a fresh forward over the same tokens (nothing stale kept)
            fresh = CachedLM(tiny_pair.target.model, tiny_pair.vocab.real_vocab_size)
            fresh.feed(seq[:-1])
            k_cached = target.cache.layers[0].keys
            k_fresh = fresh.cache.layers[0].keys
            assert torch.allclose(k_cached, k_fresh, atol=1e-4)
            checked.append(len(rounds.accepted))
        return 4

    spec = speculative_generate(
        target, drafter, ids, check_then_gamma, params, 40, CLOCK, stop=lambda out: remember(out),
        generator=gen,
    )  # fmt: skip
    assert spec.rounds is not None and len(checked) == len(spec.rounds.accepted) >= 5
    assert any(a < d for a, d in zip(spec.rounds.accepted, spec.rounds.drafted, strict=True))


def _first_token_samples(
    pair, context: list[int], params: SamplingParams, n: int, gamma: int
) -> list[int]:  # type: ignore[no-untyped-def]
    """The first token emitted by one speculative round after `context`, n times."""
    target, draft = lms(pair)
    gen = torch.Generator().manual_seed(1234)
    drafter = ModelDrafter(draft, params, CLOCK, gen)
    prefix, last = context[:-1], context[-1]
    target.reset()
    target.feed(prefix)
    drafter.start(prefix, last)
    base_t, base_d = target.length, draft.length
    samples = []
    for _ in range(n):
        step = speculative_round(target, drafter, last, gamma, params, CLOCK, gen)
        samples.append(step.emitted[0])
        target.rollback(target.length - base_t)
        draft.rollback(draft.length - base_d)
        drafter.pending = [last]
    return samples


def _chi2_against(p: torch.Tensor, samples: list[int]) -> tuple[float, float]:
    """χ² goodness of fit of samples to p, bins = tokens with expected count ≥ 5 plus 'other'."""
    n = len(samples)
    counts = torch.bincount(torch.tensor(samples), minlength=p.shape[0]).double()
    expected = p.double() * n
    big = expected >= 5
    obs = torch.cat([counts[big], counts[~big].sum().unsqueeze(0)])
    exp = torch.cat([expected[big], expected[~big].sum().unsqueeze(0)])
    keep = exp > 0
    exp = exp[keep] / exp[keep].sum() * obs[keep].sum()  # float32 p need not sum to exactly 1
    res = stats.chisquare(obs[keep].numpy(), exp.numpy())
    tv = 0.5 * float((counts / n - p.double()).abs().sum())
    return float(res.pvalue), tv


@torch.inference_mode()
@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_sampled_tokens_follow_the_target_distribution(tiny_pair, top_p: float) -> None:  # type: ignore[no-untyped-def]
    params = SamplingParams(temperature=1.0, top_p=top_p)
    tok = tiny_pair.target.tokenizer
    context = tok("The function returns the")["input_ids"]
    v = tiny_pair.vocab.real_vocab_size
    p_target = process_logits(
        tiny_pair.target.model(torch.tensor([context])).logits[0, -1, :v], params
    )
    q_draft = process_logits(
        tiny_pair.draft.model(torch.tensor([context])).logits[0, -1, :v], params
    )
    n = 2000
    samples = _first_token_samples(tiny_pair, context, params, n, gamma=3)
    p_value, tv = _chi2_against(p_target, samples)
    # Sampling error of the empirical TV over the support: E[TV] ≤ ½ Σ √(p(1−p)/n).
    tv_bound = 0.5 * float(torch.sqrt(p_target * (1 - p_target) / n).sum())
    assert p_value > 1e-3, (p_value, tv)
    assert tv < 2 * tv_bound + 0.01
    # The test has power: the draft's own distribution is rejected by the same check.
    _, tv_q = _chi2_against(q_draft, samples)
    p_q, _ = _chi2_against(q_draft, samples)
    assert p_q < 1e-6 and tv_q > tv
    assert math.isfinite(tv)


@torch.inference_mode()
def test_stops_at_eos_without_leaking_draft_tokens(tiny_pair) -> None:  # type: ignore[no-untyped-def]
    target, draft = lms(tiny_pair)
    ids = tiny_prompts(tiny_pair.target.tokenizer)[0]
    ref = baseline_generate(target, ids, GREEDY, 30, CLOCK)
    eos = ref.output_ids[6]  # pretend this token is EOS: generation must end right there
    cut = ref.output_ids.index(eos) + 1
    base = baseline_generate(target, ids, GREEDY, 30, CLOCK, frozenset({eos}))
    assert base.output_ids == ref.output_ids[:cut] and base.stop_reason == "eos"
    for gamma in (1, 3, 8):
        drafter = ModelDrafter(draft, GREEDY, CLOCK, eos_ids=frozenset({eos}))
        spec = speculative_generate(
            target, drafter, ids, fixed_gamma(gamma), GREEDY, 30, CLOCK, frozenset({eos})
        )
        assert spec.output_ids == base.output_ids
        assert spec.stop_reason == "eos"


@torch.inference_mode()
def test_stop_strings_and_max_new_tokens(tiny_pair) -> None:  # type: ignore[no-untyped-def]
    tok = tiny_pair.target.tokenizer
    target, draft = lms(tiny_pair)
    ids = tiny_prompts(tok)[1]
    ref = baseline_generate(target, ids, GREEDY, 30, CLOCK)
    text = tok.decode(ref.output_ids)
    stop_string = text[len(tok.decode(ref.output_ids[:8])) :][:3]
    assert stop_string.strip()
    check = make_stop_check(tok, [stop_string])
    base = baseline_generate(target, ids, GREEDY, 30, CLOCK, stop=check)
    assert base.stop_reason == "stop_string"
    assert stop_string in tok.decode(base.output_ids)
    assert stop_string not in tok.decode(base.output_ids[:-1])
    for gamma in (2, 5):
        spec = speculative_generate(
            target, ModelDrafter(draft, GREEDY, CLOCK), ids, fixed_gamma(gamma), GREEDY, 30, CLOCK,
            stop=check,
        )  # fmt: skip
        assert spec.output_ids == base.output_ids
        capped = speculative_generate(
            target, ModelDrafter(draft, GREEDY, CLOCK), ids, fixed_gamma(gamma), GREEDY, 7, CLOCK
        )
        assert capped.output_ids == ref.output_ids[:7] and capped.stop_reason == "max_new_tokens"
