"""Production dtypes on CPU: the tiny pair in bfloat16 and float16, as `dtype: auto` runs it on a
GPU (models/load.py `pick_dtype`), through the speculative loop, verify's checks and accept's β.

The model's forward runs in the low dtype; `process_logits` upcasts the logits to float32 before
temperature, softmax, top-k/top-p and every acceptance decision (decoding/sampling.py), as on CUDA. So
the only thing the dtype changes is the logits themselves, and it changes them differently along
two paths that are equal in exact arithmetic: the batched verify forward over γ + 1 tokens and the
one-token decode step (or the fresh forward verify's oracle uses). The tolerances below are
derived from that cross-path logit difference Δ, measured here on the same pair
(docs/theory.md §1, "Low precision"):

- greedy: a flip needs |margin| ≤ |δ_a − δ_b| ≤ 2Δ, so every mismatch must be a near-tie with
  |margin| ≤ 2Δ, and the shipped NEAR_TIE_TOLERANCE of the dtype must cover 2Δ;
- sampled: the round draws from its own verify p_r; verify's χ² compares with the oracle p_o. The
  rounding gap is a non-centrality λ ≤ n · χ²(p_r ‖ p_o) (binning only lowers it), so verify's
  false-failure rate at level a is at most ncx2.sf(chi2.isf(a, dof), dof, λ) — asserted ≤ 2a at
  the sample count used, before the real test runs;
- accept: |β(p, q) − β(p', q')| ≤ Σ|min(p,q) − min(p',q')| ≤ 2·TV(p, p') + 2·TV(q, q').
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from scipy import stats

from specbench.analysis.verify.lossless_tests import bonferroni
from specbench.config import DatasetSpec, ModelSpec, WorkloadSpec
from specbench.data import load_workload
from specbench.decoding.acceptance_rules import exact_beta
from specbench.decoding.lm import CachedLM, MemoizedLM
from specbench.decoding.sampling import process_logits
from specbench.decoding.teacher_forced import ScoredSequence, score_batch
from specbench.decoding.timing import Clock
from specbench.harness.verify.verify import model_drafter_factory
from specbench.harness.verify.verify_checks import (
    NEAR_TIE_TOLERANCE,
    Context,
    check_context,
    greedy_check,
)
from specbench.models import check_pair_compatible, load_model
from specbench.sampling_params import SamplingParams

CLOCK = Clock(torch.device("cpu"))
HOT = SamplingParams(temperature=1.0)
WARM = SamplingParams(temperature=0.7)
N_SAMPLES = 1000
LEVEL = 0.001  # verify's family-wise significance (its default)


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _pair(dtype: str) -> Any:
    target = load_model(ModelSpec(model="tiny-target", dtype=dtype, device="cpu"))
    draft = load_model(ModelSpec(model="tiny-draft", dtype=dtype, device="cpu"))
    return target, draft, check_pair_compatible(target, draft)


@pytest.fixture(scope="module", params=["bfloat16", "float16"])
def low_pair(request: pytest.FixtureRequest) -> tuple[str, Any, Any, Any]:
    return (request.param, *_pair(request.param))


def _prompts(tokenizer: Any, per_set: int = 3) -> list[Context]:
    out = []
    for name in ("tiny_code", "tiny_prose", "tiny_structured"):
        wl = WorkloadSpec(name=name, dataset=DatasetSpec(name=name))
        for p in load_workload(wl, 0)[:per_set]:
            out.append(Context(p.id, name, tokenizer(p.turns[0])["input_ids"]))
    return out


@torch.inference_mode()
def cross_path_logit_gap(model: Any, vocab: int, prompts: list[Context], width: int = 6) -> float:
    """Δ: the largest |logit(verify over `width` tokens) − logit(one-token steps)| at the same
    positions, over the prompts' last `width` tokens."""
    lm = CachedLM(model, vocab)
    gap = 0.0
    for ctx in prompts:
        ids = ctx.ids
        lm.reset()
        lm.feed(ids[:-width], keep=1)
        batched = lm.feed(ids[-width:], keep=width).float()
        lm.rollback(width)
        steps = torch.stack([lm.feed([t], keep=1)[-1] for t in ids[-width:]]).float()
        gap = max(gap, float((batched - steps).abs().max()))
    return gap


def test_pair_runs_in_the_low_dtype_and_probabilities_are_float32(low_pair: Any) -> None:
    dtype, target, _, vocab = low_pair
    assert target.dtype == getattr(torch, dtype)
    assert next(target.model.parameters()).dtype == getattr(torch, dtype)
    ids = target.tokenizer("def f(x):")["input_ids"]
    with torch.inference_mode():
        logits = CachedLM(target.model, vocab.real_vocab_size).feed(ids, keep=2)
    assert logits.dtype == getattr(torch, dtype)  # the forward really ran in the low dtype
    probs = process_logits(logits, HOT)
    assert probs.dtype == torch.float32  # upcast before softmax, as on CUDA
    assert torch.allclose(probs.sum(-1), torch.ones(2), atol=1e-5)


@torch.inference_mode()
def test_greedy_identity_up_to_derived_near_ties(low_pair: Any) -> None:
    dtype, target, draft, vocab = low_pair
    v = vocab.real_vocab_size
    prompts = _prompts(target.tokenizer, per_set=1)
    delta = cross_path_logit_gap(target.model, v, prompts)
    assert delta > 0  # the two paths really round differently in this dtype
    # the shipped tolerance covers the derived bound 2Δ measured on this pair
    assert 2 * delta <= NEAR_TIE_TOLERANCE[dtype], (dtype, delta)
    t_lm, d_lm = CachedLM(target.model, v), CachedLM(draft.model, v)
    make = model_drafter_factory(CLOCK, frozenset(vocab.eos_token_ids))
    eos = frozenset(vocab.eos_token_ids)
    check = greedy_check(t_lm, d_lm, make, prompts, [4], 12, CLOCK, eos, dtype=dtype)
    assert check.runs == len(prompts) and check.tokens_compared > 0
    for m in check.mismatches:  # a flip is only possible within the rounding gap of two paths
        assert abs(m.logit_margin) <= 2 * delta and m.near_tie, m
    assert check.passed and check.identity_rate >= 0.75, check


def _rounding_false_fail_rate(p_round: np.ndarray, p_oracle: np.ndarray, n: int) -> float:
    """Upper bound on verify's position-1 false-failure rate at LEVEL caused by rounding alone
    (module docstring): λ ≤ n·χ²(p_round ‖ p_oracle), dof of the binned test."""
    keep = p_oracle > 0
    lam = n * float(((p_round[keep] - p_oracle[keep]) ** 2 / p_oracle[keep]).sum())
    dof = max(int((n * p_oracle >= 5).sum()), 1)
    critical = stats.chi2.isf(LEVEL, dof)
    return float(stats.ncx2.sf(critical, dof, lam)) if lam > 0 else LEVEL


@torch.inference_mode()
def test_sampled_round_is_lossless_in_bfloat16(tiny_pair: Any) -> None:
    target, draft, vocab = _pair("bfloat16")
    v = vocab.real_vocab_size
    # a concentrated context at T = 0.7 keeps the distinct draft tokens (each one a bf16 verify
    # forward, ~0.1 s on a CPU without bf16 matmuls) near 60 while the χ² keeps ≥ 5 dof
    (ctx,) = [c for c in _prompts(target.tokenizer, per_set=1) if c.label == "tiny_prose-001"]
    lm = CachedLM(target.model, v)
    p_oracle = process_logits(lm.feed(ctx.ids, keep=1)[-1], WARM).double().numpy()
    lm.reset()
    lm.feed(ctx.ids[:-1], keep=1)
    verify_rows = lm.feed([ctx.ids[-1], int(p_oracle.argmax())], keep=2)  # a γ = 1 verify
    p_round = process_logits(verify_rows[0], WARM).double().numpy()
    rate = _rounding_false_fail_rate(p_round, p_oracle, N_SAMPLES)
    assert rate <= 2 * LEVEL, rate  # bf16 rounding cannot make verify fail at this n
    # the same bound has power against a real sampler bug: a residual drawn from p (not
    # norm(max(0, p − q))) shifts the first token far beyond rounding (tests/harness/test_verify.py)
    t32 = CachedLM(tiny_pair.target.model, v)
    p32 = process_logits(t32.feed(ctx.ids, keep=1)[-1], WARM).double().numpy()
    assert 0.5 * np.abs(p32 - p_oracle).sum() < 0.05  # bf16 is the same model, rounded

    make = model_drafter_factory(CLOCK, frozenset(vocab.eos_token_ids))
    c = check_context(
        MemoizedLM(target.model, v), MemoizedLM(draft.model, v), make, ctx, WARM, 1, N_SAMPLES,
        CLOCK, seed=0,
    )  # fmt: skip
    # γ = 1 (memoized forwards keep it fast): position 1 by χ², the bonus token by the PIT test
    assert c.first.dof >= 5 and [t.position for t in c.positions] == [2]
    adjusted, passed = bonferroni(c.p_values(), LEVEL)
    assert passed, (adjusted, c)
    assert c.beta is not None
    se = np.sqrt(c.beta * (1 - c.beta) / N_SAMPLES)
    assert abs(c.accept_rate - c.beta) < 4 * se + 1e-9  # y₁ accepted with probability β


@torch.inference_mode()
def test_accept_beta_in_bfloat16_within_the_derived_bound(tiny_pair: Any) -> None:
    target, draft, vocab = _pair("bfloat16")
    v = vocab.real_vocab_size
    tok = target.tokenizer
    context = tok("def add(a, b):")["input_ids"]
    response = tok("\n    return a + b\n\nprint(add(2, 3))")["input_ids"]
    unit = [ScoredSequence(0, context, response)]
    settings = [HOT, SamplingParams(temperature=0.7, top_p=0.95)]
    low = score_batch(target.model, draft.model, unit, settings, v)[0]
    ref = score_batch(tiny_pair.target.model, tiny_pair.draft.model, unit, settings, v)[0]
    assert low.beta.dtype == np.float32 and low.beta.shape == (2, len(response))

    ids = torch.tensor([context + response])
    rows = slice(len(context) - 1, len(context) + len(response) - 1)  # predict the response

    def probs(model: Any, params: SamplingParams) -> torch.Tensor:
        return process_logits(model(ids).logits[0, rows, :v], params).double()

    for s, params in enumerate(settings):
        tv_p = 0.5 * (probs(target.model, params) - probs(tiny_pair.target.model, params)).abs()
        tv_q = 0.5 * (probs(draft.model, params) - probs(tiny_pair.draft.model, params)).abs()
        bound = 2 * (tv_p.sum(-1) + tv_q.sum(-1)).numpy()
        gap = np.abs(low.beta[s] - ref.beta[s])
        assert (gap <= bound + 1e-4).all(), (params, gap, bound)
        assert gap.max() > 0  # bf16 did change β: the bound is doing work
        # the float32 β sum of bf16 logits equals the float64 one (Σ min ≤ 1 over V terms:
        # recursive-sum error ≤ V·u₃₂ ≈ 2.4e-4, far below the rounding of the logits themselves)
        p64, q64 = probs(target.model, params), probs(draft.model, params)
        exact = exact_beta(p64, q64).numpy()
        assert np.abs(low.beta[s] - exact).max() <= v * 2.0**-24 + 1e-4
