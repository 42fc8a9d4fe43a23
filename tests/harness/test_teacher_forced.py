"""Teacher-forced β (decoding/teacher_forced.py) on the tiny pair: batching, padding and chunking
change no logit; β matches the unbatched oracle; and α measured offline on target-generated
responses agrees with α measured by `run` (docs/theory.md §2 (a) both ways). The planning and the
rollout arithmetic it feeds: tests/unit/tensors/test_teacher_forced_planning.py, tests/unit/test_rollout.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from specbench.analysis import rollout
from specbench.analysis.rollout.timing import ForwardLatency
from specbench.config import DatasetSpec, WorkloadSpec, parse_config
from specbench.data import build_context_ids, load_workload
from specbench.decoding.pairstats import teacher_forced_stats
from specbench.decoding.teacher_forced import (
    ScoredSequence,
    plan_sequences,
    score_sequences,
)
from specbench.decoding.timing import measure_forward_latency
from specbench.sampling_params import SamplingParams

T1 = SamplingParams(1.0)
GREEDY = SamplingParams(0.0)
NUCLEUS = SamplingParams(0.7, 0, 0.9)


# ------------------------------------------------------------------ planning and batching (pure)


# ------------------------------------------------------------------ scoring on the tiny pair


@pytest.fixture(scope="module")
def units(tiny_pair) -> list[ScoredSequence]:  # type: ignore[no-untyped-def]
    """Four requests of different lengths: shipped prompts + arbitrary in-vocabulary responses."""
    tok = tiny_pair.target.tokenizer
    prompts = load_workload(
        WorkloadSpec(name="tiny_code", dataset=DatasetSpec(name="tiny_code"), n=4), 0
    )
    gen = torch.Generator().manual_seed(3)
    out = []
    for i, (p, n) in enumerate(zip(prompts, [5, 17, 9, 30], strict=True)):
        ids, _ = build_context_ids(tok, [{"role": "user", "content": p.turns[0]}], "auto", None)
        response = torch.randint(0, tiny_pair.vocab.real_vocab_size, (n,), generator=gen).tolist()
        out.append(ScoredSequence(i, ids, response))
    return out


def _score(tiny_pair, units, **kw):  # type: ignore[no-untyped-def]
    return score_sequences(
        tiny_pair.target.model,
        tiny_pair.draft.model,
        units,
        [T1, GREEDY, NUCLEUS],
        tiny_pair.vocab.real_vocab_size,
        **kw,
    )


def test_batched_beta_equals_the_unbatched_oracle(tiny_pair, units) -> None:  # type: ignore[no-untyped-def]
    scores = _score(tiny_pair, units)
    assert [s.request for s in scores] == [0, 1, 2, 3]
    for u, s in zip(units, scores, strict=True):
        oracle = teacher_forced_stats(
            tiny_pair.target.model, tiny_pair.draft.model, u.context_ids, u.response_ids, 1.0
        )
        np.testing.assert_allclose(s.beta[0], oracle["beta"], atol=2e-5)
        assert s.agree.tolist() == oracle["agree"]
        np.testing.assert_array_equal(s.beta[1], s.agree.astype(np.float32))  # β at T=0
        np.testing.assert_array_equal(s.positions, np.arange(len(u.response_ids)))
        assert np.all((s.beta >= 0) & (s.beta <= 1 + 1e-6))
        assert np.all(s.target_nll > 0)
    # top-p restricts both supports: β differs from T=1 somewhere
    assert not np.allclose(scores[3].beta[2], scores[3].beta[0])


def test_chunking_and_batch_size_change_nothing(tiny_pair, units) -> None:  # type: ignore[no-untyped-def]
    whole = _score(tiny_pair, units)
    chunked = _score(tiny_pair, units, chunk_tokens=7)
    single = _score(tiny_pair, units, max_batch=1)
    for a, b, c in zip(whole, chunked, single, strict=True):
        np.testing.assert_allclose(a.beta, b.beta, atol=2e-5)
        np.testing.assert_allclose(a.beta, c.beta, atol=2e-5)
        np.testing.assert_allclose(a.target_nll, b.target_nll, atol=1e-4)


def test_request_settings_add_one_row_per_request(tiny_pair, units) -> None:  # type: ignore[no-untyped-def]
    own = {0: NUCLEUS, 2: GREEDY}  # requests 1 and 3 carry no logged parameters
    scores = _score(tiny_pair, units, request_settings=own)
    assert all(s.beta.shape[0] == 4 for s in scores)
    np.testing.assert_allclose(scores[0].beta[3], scores[0].beta[2], atol=1e-6)
    np.testing.assert_array_equal(scores[2].beta[3], scores[2].beta[1])
    assert np.isnan(scores[1].beta[3]).all() and np.isnan(scores[3].beta[3]).all()


def test_windows_of_a_long_response_merge_in_order(tiny_pair, units) -> None:  # type: ignore[no-untyped-def]
    u = units[3]  # 30 response tokens, windows of 12 after 12 tokens of context
    planned = plan_sequences(u.context_ids, u.response_ids, max_len=24, request=0, bos_id=0)
    assert planned.windowed and [s.offset for s in planned.sequences] == [0, 12, 24]
    (merged,) = _score(tiny_pair, planned.sequences)
    np.testing.assert_array_equal(merged.positions, np.arange(len(u.response_ids)))
    for w in planned.sequences:
        assert w.length <= 24 and w.context_ids[0] == u.context_ids[0]
        oracle = teacher_forced_stats(
            tiny_pair.target.model, tiny_pair.draft.model, w.context_ids, w.response_ids, 1.0
        )
        got = merged.beta[0, w.offset : w.offset + len(w.response_ids)]
        np.testing.assert_allclose(got, oracle["beta"], atol=2e-5)


def test_forward_latency_micro_benchmark_reports_every_step(tiny_pair) -> None:  # type: ignore[no-untyped-def]
    m = measure_forward_latency(
        tiny_pair.target.model,
        tiny_pair.draft.model,
        tiny_pair.vocab.real_vocab_size,
        context_len=16,
        drafted=(1, 4),
        reps=2,
        warmup=1,
    )
    assert m["t_target_ms"] > 0 and m["t_draft_ms"] > 0
    assert set(m["verify_ms"]) == {1, 4} and all(v > 0 for v in m["verify_ms"].values())
    tm = rollout.time_model_from_measurement(ForwardLatency.model_validate(m))
    assert tm.source == "measured" and tm.verify_slope_ms >= 0


# ------------------------------------------------------------------ rollout arithmetic (pure)


# ------------------------------------------------------------------ cross-check with `run`


@pytest.mark.slow
def test_accept_alpha_agrees_with_run_on_target_generated_responses(
    tiny_pair, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Responses sampled from the target at T=1 (the engine's baseline_generate), measured offline
    by accept at T=1, against α measured by `run` (speculative decoding, exact β over verified
    positions) on the same prompts at T=1: the two intervals must overlap."""
    from specbench.analysis.estimators.acceptance import estimate_alpha
    from specbench.data.logged_rows import LoggedRequest
    from specbench.decoding.generate import baseline_generate
    from specbench.decoding.lm import CachedLM
    from specbench.decoding.timing import Clock
    from specbench.harness.accept.accept import AcceptOptions, measure_requests
    from specbench.harness.transformers import runner
    from specbench.records import read_records

    n_new = 40
    prompts = load_workload(
        WorkloadSpec(name="tiny_prose", dataset=DatasetSpec(name="tiny_prose"), n=8), 0
    )
    tok = tiny_pair.target.tokenizer
    lm = CachedLM(tiny_pair.target.model, tiny_pair.vocab.real_vocab_size)
    requests = []
    for i, p in enumerate(prompts):
        messages = [{"role": "user", "content": p.turns[0]}]
        ids, _ = build_context_ids(tok, messages, "auto", None)
        with torch.inference_mode():
            gen = baseline_generate(
                lm,
                ids,
                T1,
                n_new,
                Clock(lm.device),
                tiny_pair.eos_ids,
                generator=torch.Generator().manual_seed(i),
            )
        text = tok.decode(gen.output_ids, skip_special_tokens=True)
        if text.strip():
            requests.append(LoggedRequest(p.id, p.id, "tiny_prose", messages, text, T1))
    assert len(requests) >= 6
    opts = AcceptOptions(settings=[T1], logged_params=False)
    offline = measure_requests(
        tiny_pair.target,
        tiny_pair.draft,
        tiny_pair.vocab.real_vocab_size,
        requests,
        opts,
        lambda _b: rollout.time_model_relative(0.1, 0.0, "default"),
    )
    a_accept = offline.buckets[0].acceptance.settings[0].alpha

    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"id": p.id, "prompt": p.turns[0]}) + "\n" for p in prompts))
    cfg = parse_config(
        {
            "name": "xcheck",
            "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
            "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
            "workloads": [{"name": "tiny_prose", "dataset": {"path": str(data)}}],
            "sampling": {"temperatures": [1.0]},
            "gammas": [4],
            "max_new_tokens": n_new,
            "warmup": 0,
        }
    )
    runner.run(cfg, tmp_path / "run")  # loads its own copy of the pair (a second or so)
    spec = [r for r in read_records(tmp_path / "run" / "records.jsonl") if r["kind"] == "spec"]
    a_run = estimate_alpha(spec, 4, 2000, 0.95).exact_beta

    assert 0.0 < a_accept.value < 1.0 and 0.0 < a_run.value < 1.0
    gap = abs(a_accept.value - a_run.value)
    assert gap <= a_accept.halfwidth + a_run.halfwidth, (a_accept, a_run)
