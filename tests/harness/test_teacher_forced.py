"""Teacher-forced β (spec/teacher_forced.py) and the rollout arithmetic it feeds
(analysis/rollout/): batching, padding and chunking change no logit; β matches the unbatched
oracle; the plan maps α's interval through the speedup model; and α measured offline on
target-generated responses agrees with α measured by `run` (docs/theory.md §2 (a) both ways)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from specbench.analysis import roi, rollout
from specbench.analysis.stats import Estimate
from specbench.analysis.stats import ratio_ci as stats_ratio_ci
from specbench.config import DatasetSpec, WorkloadSpec, parse_config
from specbench.data import build_context_ids, load_workload
from specbench.sampling_params import SamplingParams
from specbench.spec.pairstats import teacher_forced_stats
from specbench.spec.teacher_forced import (
    RequestScores,
    ScoredSequence,
    make_batches,
    plan_sequences,
    score_sequences,
)
from specbench.spec.timing import measure_forward_latency

T1 = SamplingParams(1.0)
GREEDY = SamplingParams(0.0)
NUCLEUS = SamplingParams(0.7, 0, 0.9)


# ------------------------------------------------------------------ planning and batching (pure)


def test_plan_sequences_fits_in_one_unit() -> None:
    planned = plan_sequences([1, 2, 3], [4, 5], max_len=5, request=7)
    assert planned.sequences == [ScoredSequence(7, [1, 2, 3], [4, 5], 0)]
    assert (planned.windowed, planned.prompt_cut, planned.response_cut) == (False, 0, 0)


def test_plan_sequences_windows_keep_bos_and_cover_every_response_token() -> None:
    prompt, response = [0, 11, 12, 13], list(range(100, 110))
    planned = plan_sequences(prompt, response, max_len=8, request=0, bos_id=0)
    assert planned.windowed
    # windows of 8 // 2 = 4 response tokens, each after the last 4 tokens before it (BOS kept)
    assert [s.offset for s in planned.sequences] == [0, 4, 8]
    assert [t for s in planned.sequences for t in s.response_ids] == response
    assert planned.sequences[0].context_ids == prompt
    assert planned.sequences[1].context_ids == [0, 101, 102, 103]
    assert planned.sequences[2].context_ids == [0, 103, 104, 105, 106, 107]
    assert all(s.length <= 8 for s in planned.sequences)
    assert planned.sequences[2].response_ids == [108, 109]


def test_plan_sequences_truncate_cuts_prompt_front_and_response_tail() -> None:
    planned = plan_sequences(
        [0, *range(1, 10)], list(range(50, 60)), max_len=8, request=0, overflow="truncate", bos_id=0
    )
    (seq,) = planned.sequences
    assert seq.context_ids == [0, 7, 8, 9]  # 8 // 2 tokens: BOS + the last three
    assert seq.response_ids == [50, 51, 52, 53]
    assert (planned.prompt_cut, planned.response_cut) == (6, 6)


def test_make_batches_respects_the_token_budget_longest_first() -> None:
    seqs = [ScoredSequence(i, [1] * n, [2]) for i, n in enumerate([3, 9, 5, 5, 1])]
    batches = make_batches(seqs, batch_tokens=12, max_batch=8)
    assert batches[0] == [1]  # 10 tokens: a second row would need 20
    assert sorted(i for b in batches for i in b) == [0, 1, 2, 3, 4]
    for b in batches:
        longest = max(seqs[i].length for i in b)
        assert len(b) == 1 or len(b) * longest <= 12


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
    tm = rollout.time_model_from_measurement(m)
    assert tm.source == "measured" and tm.verify_slope_ms >= 0


# ------------------------------------------------------------------ rollout arithmetic (pure)


def _req(positions: list[int], betas: list[float]) -> RequestScores:
    b = np.asarray([betas], float)
    return RequestScores(0, np.asarray(positions), b, b[0] > 0.5, np.ones(len(betas)))


def test_bucket_alpha_profile_and_drift_by_hand() -> None:
    three = [
        _req([0, 1, 2, 3], [1.0, 1.0, 0.0, 0.0]),  # bin [0,2): 1, 1   bin [2,4): 0, 0
        _req([0, 1, 2, 3], [1.0, 1.0, 0.5, 0.5]),
        _req([0, 1], [0.5, 0.5]),
    ]
    acc = rollout.summarize_bucket(
        "b", three * 3, ["T=1"], [0, 2, 4], n_boot=500, target_halfwidth=0.02
    )
    (s,) = acc.settings
    assert acc.requests == 9 and acc.tokens == 30 and s.tokens == 30
    assert s.alpha.value == pytest.approx(18.0 / 30)
    assert [(p.start, p.stop, p.tokens, p.requests) for p in s.profile] == [
        (0, 2, 18, 9),
        (2, 4, 12, 6),
    ]
    assert s.profile[0].alpha.value == pytest.approx(5.0 / 6)
    assert s.profile[1].alpha.value == pytest.approx(1.0 / 4)
    assert s.drift is not None and s.drift.value == pytest.approx(1.0 / 4 - 5.0 / 6)
    assert s.drift_bins is not None and s.drift_bins[1].start == 2
    assert s.requests_needed is not None and s.requests_needed > 9
    assert acc.greedy_agreement.value == pytest.approx(12 / 30)  # β > 0.5 in this fixture
    # a bin that fewer than DRIFT_MIN_REQUESTS requests reach cannot decide a drift
    few = rollout.summarize_bucket("b", three, ["T=1"], [0, 2, 4], n_boot=200)
    assert few.settings[0].drift is None and len(few.settings[0].profile) == 2


def test_ratio_ci_of_one_request_has_no_interval() -> None:
    # rollout's intervals are analysis.stats' (one resampling layer): one request has none
    rng = np.random.default_rng(0)
    num, den = rng.uniform(0, 30, 200), rng.integers(30, 60, 200).astype(float)
    assert math.isnan(stats_ratio_ci(num[:1], den[:1]).lo)


def test_plan_maps_alpha_interval_through_the_speedup_model() -> None:
    tm = rollout.time_model_from_flags(80.0, 7.0, 0.0)
    plan = rollout.plan_rollout(Estimate(0.8, 0.75, 0.85), tm, gamma_max=8, margin=0.05)
    g = plan.best_gamma
    assert plan.verdict == "on" and plan.gamma == g
    assert plan.speedup.value == pytest.approx(roi.speedup(g, 0.8, 80.0, 7.0))
    assert plan.speedup.lo == pytest.approx(roi.speedup(g, 0.75, 80.0, 7.0))
    assert plan.speedup.hi == pytest.approx(roi.speedup(g, 0.85, 80.0, 7.0))
    assert g == max(range(1, 9), key=lambda k: roi.speedup(k, 0.8, 80.0, 7.0))
    assert plan.itl_ms.value == pytest.approx(80.0 / plan.speedup.value)
    # docs/theory.md §4 worked check: T_ar 100, T_d 8, α 0.2 → 1.11× at γ = 1
    assert rollout.predicted_speedup(
        1, 0.2, rollout.time_model_from_flags(100, 8, 0)
    ) == pytest.approx(1.2 / 1.08)


def test_plan_is_off_when_the_interval_reaches_below_the_margin() -> None:
    tm = rollout.time_model_from_flags(100.0, 8.0, 0.0)
    # γ=1 at α=0.2 predicts 1.11×, but the CI low end α=0.05 gives 0.97×: not proven
    unsure = rollout.plan_rollout(Estimate(0.2, 0.05, 0.35), tm, 8, 0.05)
    assert unsure.best_gamma == 1 and unsure.verdict == "off" and unsure.gamma == 0
    assert unsure.speedup.lo < 1.05 < unsure.speedup.value + 0.1
    slow = rollout.plan_rollout(Estimate(0.05, 0.03, 0.07), tm, 8, 0.05)
    assert (slow.verdict, slow.best_gamma, slow.speedup.value) == ("off", 0, 1.0)
    assert "no γ ≤ 8 beats plain decoding" in slow.reason
    be = rollout.break_even_alpha(1, tm)
    assert be is not None and rollout.predicted_speedup(1, be, tm) == pytest.approx(1.0)


def test_time_model_from_results_prefers_the_bucket_workload() -> None:
    def entry(name: str, t_ar: float) -> dict:  # type: ignore[type-arg]
        return {
            "workload": name,
            "baseline_step_ms": t_ar,
            "timing": {
                "t_draft_ms": {"mean": 1.0},
                "verify_fit": {"t0_ms": 2.0, "t1_ms_per_token": 0.5},
                "overhead_fit": {"o0_ms": 0.25, "o1_ms_per_token": 0.1},
            },
        }

    res = {"workloads": [entry("a", 10.0), entry("b", 20.0)]}
    tm = rollout.time_model_from_results(res, "b", "r.json")
    assert (tm.t_target_ms, tm.t_draft_ms, tm.verify_base_ms) == (20.0, 1.0, 2.25)
    assert tm.verify_slope_ms == pytest.approx(0.6)
    assert rollout.time_model_from_results(res, "zzz", "r.json").t_target_ms == 15.0


# ------------------------------------------------------------------ cross-check with `run`


@pytest.mark.slow
def test_accept_alpha_agrees_with_run_on_target_generated_responses(
    tiny_pair, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Responses sampled from the target at T=1 (the engine's baseline_generate), measured offline
    by accept at T=1, against α measured by `run` (speculative decoding, exact β over verified
    positions) on the same prompts at T=1: the two intervals must overlap."""
    from specbench.analysis.acceptance import estimate_alpha
    from specbench.data.logged_rows import LoggedRequest
    from specbench.harness import runner
    from specbench.harness.accept import AcceptOptions, measure_requests
    from specbench.records import read_records
    from specbench.spec.generate import baseline_generate
    from specbench.spec.lm import CachedLM
    from specbench.spec.timing import Clock

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
