"""γ policies and the n-gram drafter on the tiny pair (the hand-computed cases: tests/unit/test_policies.py,
tests/unit/tensors/test_ngram_drafter.py)."""

from __future__ import annotations

import torch

from specbench.config import PolicySpec
from specbench.decoding.drafters import NgramDrafter
from specbench.decoding.generate import baseline_generate, speculative_generate
from specbench.decoding.lm import CachedLM
from specbench.decoding.policies import Policy
from specbench.decoding.timing import Clock
from specbench.sampling_params import SamplingParams

CLOCK = Clock(torch.device("cpu"))


@torch.inference_mode()
def test_ngram_drafting_is_lossless_under_greedy(tiny_pair) -> None:  # type: ignore[no-untyped-def]
    tok = tiny_pair.target.tokenizer
    lm = CachedLM(tiny_pair.target.model, tiny_pair.vocab.real_vocab_size)
    greedy = SamplingParams()
    prompt = tok("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\ng = 7\nh =")["input_ids"]
    base = baseline_generate(lm, prompt, greedy, 30, CLOCK)
    for gamma in (1, 4):
        spec = speculative_generate(
            lm, NgramDrafter(1, 3, CLOCK), prompt, lambda r, g=gamma: g, greedy, 30, CLOCK
        )
        assert spec.output_ids == base.output_ids
        assert spec.rounds is not None and sum(spec.rounds.accepted) > 0


@torch.inference_mode()
def test_policy_run_uses_the_policy_gammas(tiny_pair) -> None:  # type: ignore[no-untyped-def]
    from specbench.decoding.drafters import ModelDrafter

    tok = tiny_pair.target.tokenizer
    v = tiny_pair.vocab.real_vocab_size
    t_lm, d_lm = CachedLM(tiny_pair.target.model, v), CachedLM(tiny_pair.draft.model, v)
    pol = Policy(PolicySpec(name="heuristic", gamma=3, max_gamma=8))
    greedy = SamplingParams()
    spec = speculative_generate(
        t_lm, ModelDrafter(d_lm, greedy, CLOCK), tok("def main(argv):\n    ")["input_ids"],
        pol.controller(), greedy, 40, CLOCK,
    )  # fmt: skip
    r = spec.rounds
    assert r is not None
    expected = [3]
    for n in range(1, len(r.accepted)):
        expected.append(pol.update(expected[-1], r.accepted[:n], r.drafted[:n]))
    # the loop caps γ by the tokens still allowed (a round emits ≤ γ + 1); otherwise it follows
    # the policy exactly
    capped = []
    for j, e in enumerate(expected):
        remaining = 40 - (1 + sum(r.emitted[:j]))
        capped.append(max(1, min(e, remaining - 1)))
    assert r.gamma == capped
    assert len(set(r.gamma)) > 1  # the policy actually moved γ
