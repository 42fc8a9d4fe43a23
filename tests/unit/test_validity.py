"""Content validity in the analysis: degenerate prompts never drive the verdict, α and speedup
over the non-degenerate prompts, per-prompt α and heterogeneity, per-position intervals — on
synthetic records whose acceptance and timing are known exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from specbench.analysis.decide.validity import identical_across_prompts
from specbench.analysis.documents.results_model import RunEnv
from specbench.analysis.documents.results_model_workload import VerdictBasis
from specbench.analysis.estimators.content import answer_checks
from specbench.analysis.pipeline.acceptance_detail import (
    MIN_POSITION_ROUNDS,
    heterogeneity,
    per_position_intervals,
)
from specbench.analysis.pipeline.results import build_results
from specbench.config.stored import StoredConfig
from tests.unit.synthetic import baseline_record, spec_record
from tests.unit.test_engine_metrics import _req

LOOP_IDS = [7, 8] * 30
LOOP_TEXT = "\n#" * 30


def _answer(rec: dict[str, Any], looping: bool, i: int) -> dict[str, Any]:
    ids = LOOP_IDS if looping else list(range(1000 * i, 1000 * i + 30))
    text = (
        LOOP_TEXT
        if looping
        else f"Answer {i}: the river floods each spring, so farms moved uphill."
    )
    return {**rec, "output_ids": [ids], "answers": [text], "stop_reason": ["max_new_tokens"]}


def _records(n_loop: int, n_text: int, gammas: tuple[int, ...] = (4,)) -> list[dict[str, Any]]:
    """Looping prompts: every draft token accepted, long answers (fast). Text prompts: nothing
    accepted, short answers (speculation slower than the baseline, t_ar = 10 ms)."""
    rng = np.random.default_rng(0)
    recs = []
    for i in range(n_loop + n_text):
        looping = i < n_loop
        pid = f"w-{i:03d}"
        recs.append(_answer(baseline_record(pid, 10.0, new_tokens=60, temperature=0.0), looping, i))
        for g in gammas:
            alphas = [1.0 if looping else 0.0] * g
            rec = spec_record(rng, pid, g, alphas, 40 if looping else 6, temperature=0.0)
            recs.append(_answer(rec, looping, i))
    return recs


CONFIG = StoredConfig.model_validate({"workloads": [{"name": "w"}], "decision": {"bootstrap": 400}})


def test_verdict_uses_only_the_non_degenerate_prompts() -> None:
    res = build_results(_records(8, 6), CONFIG, RunEnv())
    (e,) = res.workloads
    c = e.content
    assert c is not None and c.n_degenerate == 8 and c.reasons == {"repetition": 8}
    # with the loops counted the pair looks fast enough to turn on …
    assert c.all_prompts is not None and c.all_prompts.verdict == "on"
    assert c.all_prompts.speedup is not None and (c.all_prompts.speedup.value or 0) > 1.5
    # … over the text prompts it is slower than plain decoding (round 16 ms for 1 token vs 10 ms)
    clean = c.non_degenerate
    assert clean is not None and clean.speedup is not None and clean.alpha is not None
    assert clean.speedup.value == pytest.approx(10 / 16, rel=1e-6)
    assert clean.alpha.value == 0.0
    rec = e.recommendation
    assert rec.verdict == "off"
    assert rec.basis == VerdictBasis(prompts="non_degenerate", n_used=6, n_degenerate_excluded=8)
    assert rec.reason.startswith("over the 6 of 14 non-degenerate prompts")
    assert any(w.startswith("degenerate output: 8 of 14") for w in e.warnings)
    assert c.differs_beyond_intervals
    assert any("inflated by repetition" in w for w in e.warnings)


def test_too_few_real_answers_is_not_measured_and_stays_out_of_the_pool() -> None:
    res = build_results(_records(5, 1), CONFIG, RunEnv())
    (e,) = res.workloads
    assert e.recommendation.verdict == "not_measured"
    assert e.recommendation.reason.startswith("degenerate output (5 of 6")
    (pool,) = res.global_.by_temperature
    assert pool.workloads == [] and pool.not_measured == ["w"]


def test_clean_workload_is_unchanged() -> None:
    res = build_results(_records(0, 6), CONFIG, RunEnv())
    (e,) = res.workloads
    assert e.content is not None and e.content.n_degenerate == 0
    assert "all_prompts" not in e.content.model_fields_set  # written only with degenerate ones
    assert e.recommendation.basis is not None and e.recommendation.basis.prompts == "all"
    assert not any("degenerate" in w for w in e.warnings)


def test_per_prompt_alpha_beside_the_token_pooled_one() -> None:
    """One prompt accepts everything (α_p = 1), the other nothing (α_p = 0): the mean over prompts
    is 1/2; pooled over verified positions it is 40·4 / (40·4 + 6·1)."""
    res = build_results(_records(1, 1) + _records(0, 0), CONFIG, RunEnv())
    ppa = res.workloads[0].per_prompt_alpha
    assert ppa is not None and ppa.request_mean is not None and ppa.token_pooled is not None
    assert sorted(v.alpha or 0.0 for v in ppa.values) == [0.0, 1.0]
    assert ppa.request_mean.value == pytest.approx(0.5)
    assert ppa.token_pooled.value == pytest.approx(160 / 166, abs=1e-6)
    assert [v.degenerate for v in ppa.values] == [True, False]


def test_heterogeneity_hand_computed() -> None:
    """Prompt A: 10 rounds all accepted at γ = 4 (L = 50); prompt B: 30 rounds none (L = 30).
    At γ = 1: ā_A = 2, ā_B = 1 → per prompt 80 / (50/2 + 30/1) = 1.4545; over rounds
    1 + 10/40 = 1.25 (docs/theory.md §3)."""
    rng = np.random.default_rng(1)
    recs = [
        spec_record(rng, "a", 4, [1.0] * 4, 10),
        spec_record(rng, "b", 4, [0.0] * 4, 30),
    ]
    rows = {r.gamma: r for r in heterogeneity(recs, 4)}
    assert rows[1].per_prompt_pooled == pytest.approx(80 / 55, abs=1e-6)
    assert rows[1].round_pooled == pytest.approx(1.25)
    assert rows[4].per_prompt_pooled == pytest.approx(2.0)  # = tokens / rounds at γ_max
    # pooled α = 40 / 70 verified positions; iid per prompt at α = 1 and 0
    alpha = 40 / 70
    assert rows[2].iid_at_pooled_alpha == pytest.approx(1 + alpha + alpha**2, abs=1e-6)
    assert rows[2].iid_per_prompt == pytest.approx(80 / (50 / 3 + 30 / 1), abs=1e-6)


def test_per_position_rates_and_thin_positions() -> None:
    """Position 1 is reached by all 40 rounds and accepted in A's 10; positions 2–4 only by A's
    10 rounds (< MIN_POSITION_ROUNDS): rate 1 but flagged as too thin to plot."""
    rng = np.random.default_rng(2)
    recs = [
        spec_record(rng, "a", 4, [1.0] * 4, 10),
        spec_record(rng, "b", 4, [0.0] * 4, 30),
    ]
    pos = per_position_intervals(recs, 4, 200, 0.95)
    assert pos[0].rate == pytest.approx(0.25) and pos[0].rounds == 40
    lo, hi = pos[0].ci95
    assert pos[0].enough and lo is not None and hi is not None and lo <= 0.25 <= hi
    assert [p.rounds for p in pos[1:]] == [10, 10, 10]
    assert all(p.rate == 1.0 and not p.enough for p in pos[1:])
    assert MIN_POSITION_ROUNDS > 10


def test_identical_answers_across_prompts() -> None:
    base = [
        _answer(baseline_record(f"p{i}", 10.0), looping=False, i=0) for i in range(2)
    ]  # the same text for two prompts
    other = _answer(baseline_record("p2", 10.0), looping=False, i=5)
    flagged = identical_across_prompts([*base, other])
    assert set(flagged) == {id(base[0]), id(base[1])}
    assert "1 other prompt" in flagged[id(base[0])]


def test_mean_target_logprob_per_prompt_then_over_prompts() -> None:
    """Each prompt weighs the same: prompt 0 (degenerate, two answers −0.1 and −0.3 → −0.2),
    prompt 1 (one answer −2.0) → overall −1.1; split by degeneracy."""
    recs = _records(1, 1)
    values = {"w-000": [-0.1, -0.3], "w-001": [-2.0]}
    for r in recs:
        seq = values[r["prompt_id"]]
        lp = seq.pop(0) if len(seq) > 1 else seq[0]
        r["content"] = [
            answer_checks(r["output_ids"][0], r["answers"][0], "max_new_tokens", lp).model_dump()
        ]
    c = build_results(recs, CONFIG, RunEnv()).workloads[0].content
    assert c is not None
    assert c.mean_target_logprob == pytest.approx(-1.1)
    assert c.mean_target_logprob_degenerate == pytest.approx(-0.2)
    assert c.mean_target_logprob_non_degenerate == pytest.approx(-2.0)
    none = build_results(_records(1, 1), CONFIG, RunEnv()).workloads[0].content
    assert none is not None and none.mean_target_logprob is None  # from the answers: not measured


def _engine_records(n_loop: int, n_text: int) -> list[dict[str, Any]]:
    """An engine run (the synthetic vllm records) whose looping prompts are fast under
    speculation (TPOT 1 ms vs 10) and whose text prompts are slower (10.5 ms)."""
    rng = np.random.default_rng(2)
    recs = []
    for i in range(n_loop + n_text):
        looping, pid = i < n_loop, f"p{i}"
        jitter = float(rng.normal(0, 0.05))
        for kind, gamma, tpot in (("baseline", 0, 10.0), ("spec", 3, 1.0 if looping else 10.5)):
            rec = _req(kind, pid, gamma, 1, tpot + jitter)
            del rec["output_ids"]  # the openai backend keeps only the text
            text = (
                LOOP_TEXT
                if looping
                else f"Answer {i}: the river floods each spring, so farms moved uphill."
            )
            recs.append({**rec, "answers": [text], "stop_reason": ["length"]})
    return recs


def test_engine_run_flags_loops_and_decides_on_real_text() -> None:
    res = build_results(_engine_records(16, 12), CONFIG, RunEnv())
    (e,) = res.workloads
    c = e.content
    assert c is not None and c.n_degenerate == 16 and c.reasons == {"repetition": 16}
    assert c.all_prompts is not None
    assert c.all_prompts.verdict == "on"  # the loops would have turned it on
    rec = e.recommendation
    assert rec.verdict == "off"
    assert rec.basis == VerdictBasis(prompts="non_degenerate", n_used=12, n_degenerate_excluded=16)
    assert c.non_degenerate is not None and c.non_degenerate.speedup is not None
    assert c.non_degenerate.speedup.value == pytest.approx(10.0 / 10.5, rel=0.02)
    assert e.engine is not None
    assert e.engine.chosen_gamma == 3  # the best measured (OFF) setting, re-pointed
    assert any(w.startswith("degenerate output: 16 of 28") for w in e.warnings)
    assert c.differs_beyond_intervals  # speedup ≈ 2× vs 0.95×
    clean = build_results(_engine_records(0, 7), CONFIG, RunEnv()).workloads[0]
    assert clean.content is not None and clean.content.n_degenerate == 0
    assert clean.recommendation.basis is not None
    assert clean.recommendation.basis.prompts == "all"
