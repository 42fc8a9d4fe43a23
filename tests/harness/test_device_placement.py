"""Device placement without a GPU: one speculative round, verify's oracle and one accept batch run
with the models on one device and torch's *default* device set to another (`meta`), the
situation of a CUDA run, where the models sit on cuda and a tensor made without `device=` lands
on the host.

Under this seam a tensor created without naming its device becomes a meta tensor: the first op
that mixes it with the model's tensors raises, and any value read from it raises too. So a run
that completes, with the same tokens and β as without the seam, places every tensor it makes on
the device it meant: the model's, or the host where it says `device="cpu"` on purpose (accept's
batch assembly and results). `test_the_seam_catches_a_tensor_made_without_its_device` shows it
fails on the defect it is for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

from specbench.decoding.acceptance_rules import RoundDecision, accept_draft
from specbench.decoding.drafters import ModelDrafter, NgramDrafter
from specbench.decoding.generate import speculative_round
from specbench.decoding.lm import CachedLM
from specbench.decoding.lossless import prefix_distributions
from specbench.decoding.teacher_forced import ScoredSequence, score_batch
from specbench.decoding.timing import Clock
from specbench.sampling_params import SamplingParams

CLOCK = Clock(torch.device("cpu"))


@contextmanager
def default_device_elsewhere() -> Iterator[None]:
    torch.set_default_device("meta")
    try:
        yield
    finally:
        torch.set_default_device(None)


def _round(pair: Any, params: SamplingParams, drafter_kind: str, rule: Any = None) -> Any:
    v = pair.vocab.real_vocab_size
    target = CachedLM(pair.target.model, v)
    gen = torch.Generator(device=target.device).manual_seed(3)
    drafter: Any = (
        ModelDrafter(CachedLM(pair.draft.model, v), params, CLOCK, gen)
        if drafter_kind == "model"
        else NgramDrafter(1, 3, CLOCK)
    )
    ids = pair.target.tokenizer("x = 1\ny = 2\nx = 1\ny =")["input_ids"]
    with torch.inference_mode():
        # the state after a prefill of ids[:-1] that emitted ids[-1]
        target.feed(ids[:-1], keep=1)
        drafter.start(ids[:-1], ids[-1])
        step = speculative_round(target, drafter, ids[-1], 4, params, CLOCK, gen, rule)
    return step, target


@pytest.mark.parametrize(
    ("temperature", "drafter_kind"), [(0.0, "model"), (1.0, "model"), (1.0, "ngram")]
)
def test_one_round_places_every_tensor_on_the_model_device(
    tiny_pair: Any, temperature: float, drafter_kind: str
) -> None:
    params = SamplingParams(temperature=temperature)
    plain, _ = _round(tiny_pair, params, drafter_kind)
    with default_device_elsewhere():
        seamed, target = _round(tiny_pair, params, drafter_kind)
    assert seamed.emitted == plain.emitted and seamed.n_accepted == plain.n_accepted
    assert seamed.beta == plain.beta and len(seamed.proposal.tokens) >= 1
    assert seamed.logprob is not None and seamed.logprob.device == target.device
    if seamed.proposal.q_draft is not None:
        assert seamed.proposal.q_draft.device == target.device
    assert target.cache_length() == target.length  # the rollback ran on the real cache


def test_verify_oracle_places_its_batch_on_the_model_device(tiny_pair: Any) -> None:
    v = tiny_pair.vocab.real_vocab_size
    target = CachedLM(tiny_pair.target.model, v)
    ids = tiny_pair.target.tokenizer("def f(x):")["input_ids"]
    prefixes = {(5, 6), (7,), (9, 10, 11)}
    params = SamplingParams(temperature=1.0)
    with torch.inference_mode():
        plain = prefix_distributions(target, ids, prefixes, params)
        with default_device_elsewhere():
            seamed = prefix_distributions(target, ids, prefixes, params)
    assert plain.keys() == seamed.keys() and len(plain) == 6
    for key, row in plain.items():
        assert (seamed[key] == row).all()


def test_one_accept_batch_places_its_tensors_as_meant(tiny_pair: Any) -> None:
    v = tiny_pair.vocab.real_vocab_size
    tok = tiny_pair.target.tokenizer
    ctx, resp = tok("def f(x):")["input_ids"], tok("    return x")["input_ids"]
    units = [ScoredSequence(0, ctx, resp), ScoredSequence(1, ctx[:3], resp[:2])]
    settings = [SamplingParams(temperature=1.0)]
    own = [SamplingParams(temperature=0.5), None]  # the logged-parameters row, NaN for unit 1
    t, d = tiny_pair.target.model, tiny_pair.draft.model
    plain = score_batch(t, d, units, settings, v, own)
    with default_device_elsewhere():
        seamed = score_batch(t, d, units, settings, v, own)
    for a, b in zip(plain, seamed, strict=True):
        assert (a.agree == b.agree).all() and (a.target_nll == b.target_nll).all()
        assert ((a.beta == b.beta) | (a.beta != a.beta)).all()  # equal, NaN where NaN
    assert seamed[0].beta.shape == (2, len(resp)) and seamed[1].beta[1].tolist() != [0.0, 0.0]


def test_the_seam_catches_a_tensor_made_without_its_device(tiny_pair: Any) -> None:
    def stray_coins(
        draft_tokens: torch.Tensor,
        p_target: torch.Tensor,
        q_draft: torch.Tensor | None,
        greedy: bool,
        generator: torch.Generator | None = None,
    ) -> RoundDecision:
        torch.arange(int(draft_tokens.shape[0])) + draft_tokens  # no device=: the host on CUDA
        return accept_draft(draft_tokens, p_target, q_draft, greedy, generator)

    params = SamplingParams(temperature=1.0)
    _round(tiny_pair, params, "model", stray_coins)  # fine where every tensor is on one device
    with default_device_elsewhere(), pytest.raises((RuntimeError, NotImplementedError)):
        _round(tiny_pair, params, "model", stray_coins)
