"""`analysis.compare` on synthetic pairs of runs with known truth: planted regressions are flagged,
runs from one distribution are not, comparability rules, and the rendered outputs parse back."""

from __future__ import annotations

import copy
import json
import math
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pytest
from scipy import stats

from specbench.analysis.compare.difference_tests import (
    DiffTest,
    exact_test,
    model_test,
    normal_difference,
)
from specbench.analysis.compare.environment import identity_differences
from specbench.analysis.compare.metrics import (
    IMPROVED,
    INCONCLUSIVE,
    INFORMATIONAL,
    METRICS,
    NOT_SIGNIFICANT,
    REGRESSED,
    UNCHANGED,
    Thresholds,
)
from specbench.analysis.compare.samples import (
    Samples,
    Summary,
    speedup_samples,
    sum_by_key,
    timing_samples,
)
from specbench.analysis.compare.sides import Side, merge_runs, side_from_records, side_from_results
from specbench.analysis.compare.verdict import compare, judge
from specbench.analysis.documents.results_model import RunEnv, RunResults
from specbench.analysis.pipeline.results import build_results
from specbench.config.stored import StoredConfig
from specbench.report.compare.compare import to_dict, to_markdown
from specbench.report.compare.compare_junit import to_junit

from .synthetic import baseline_record

ALPHAS = (0.8, 0.75, 0.7, 0.65)
ENV = {
    "device": "cpu",
    "gpu": None,
    "cpu": "Synthetic CPU",
    "torch": "2.13",
    "transformers": "5.19",
}


def config(target: str = "tiny-target", bootstrap: int = 300) -> dict[str, Any]:
    return {
        "name": "synthetic",
        "target": {"model": target, "dtype": "float32"},
        "draft": {"method": "model", "model": "tiny-draft", "dtype": "float32"},
        "workloads": [{"name": "w", "weight": 1.0}],
        "sampling": {"temperatures": [1.0], "top_p": 1.0, "top_k": 0},
        "gammas": [4],
        "max_new_tokens": 64,
        "decision": {"margin": 0.05, "bootstrap": bootstrap},
    }


def stored_config(target: str = "tiny-target", bootstrap: int = 300) -> StoredConfig:
    """`config()` as a run directory's config.yaml is read back."""
    return StoredConfig.model_validate(config(target, bootstrap))


def spec_record(
    rng: np.random.Generator,
    prompt_id: str,
    gamma: int,
    alphas: tuple[float, ...],
    n_rounds: int,
    t_draft: float,
    t0: float,
    t1: float,
    overhead: float,
    concentration: float = 4.0,
) -> dict[str, Any]:
    """tests/unit/synthetic.spec_record, vectorised: position i has β ~ Beta(mean alphas[i]),
    accepted ~ Bernoulli(β); noise-free timing (draft step t_draft, verify t0 + t1·γ, overhead)."""
    a = np.asarray(alphas[:gamma])
    betas = rng.beta(a * concentration, (1 - a) * concentration, size=(n_rounds, gamma))
    ok = rng.random((n_rounds, gamma)) < betas
    accepted = np.where(ok.all(axis=1), gamma, ok.argmin(axis=1)).tolist()
    emitted = [n + 1 for n in accepted]
    new_tokens = 1 + sum(emitted)
    verify = t0 + t1 * gamma
    decode_ms = n_rounds * (gamma * t_draft + verify + overhead)
    return {
        "schema": 1,
        "kind": "spec",
        "unit_kind": "spec",
        "workload": "w",
        "temperature": 1.0,
        "gamma": gamma,
        "drafter": "model",
        "policy": "fixed",
        "prompt_id": prompt_id,
        "repeat": 0,
        "status": "ok",
        "new_tokens": new_tokens,
        "ttft_ms": [5.0],
        "wall_ms": 5.0 + decode_ms,
        "decode_ms": decode_ms,
        "tokens_per_s": new_tokens / ((5.0 + decode_ms) / 1000),
        "tpot_ms": decode_ms / (new_tokens - 1),
        "peak_memory_mb": 100.0,
        "rounds": {
            "gamma": [gamma] * n_rounds,
            "drafted": [gamma] * n_rounds,
            "accepted": accepted,
            "emitted": emitted,
            "beta": betas.round(6).tolist(),
            "draft_top_prob": [[0.5] * gamma] * n_rounds,
            "draft_ms": [[t_draft] * gamma] * n_rounds,
            "verify_ms": [verify] * n_rounds,
            "overhead_ms": [overhead] * n_rounds,
        },
    }


def make_records(
    seed: int,
    n_prompts: int = 40,
    n_rounds: int = 40,
    alpha_shift: float = 0.0,
    overhead: float = 0.0,
    gammas: tuple[int, ...] = (4,),
    jitter: float = 0.03,
) -> list[dict[str, Any]]:
    """One synthetic run: per prompt a machine-speed factor (jitter), a baseline record at
    T_ar = 20 ms and a speculative record per γ (T_d = 1 ms, verify 10 + 0.5·γ ms)."""
    rng = np.random.default_rng(seed)
    alphas = tuple(a + alpha_shift for a in ALPHAS)
    out = []
    for i in range(n_prompts):
        f = 1.0 + jitter * rng.standard_normal()
        base = baseline_record(f"p{i}", 20.0 * f)
        base["tokens_per_s"] = 1000.0 / base["tpot_ms"]
        out.append(base)
        for g in gammas:
            out.append(
                spec_record(rng, f"p{i}", g, alphas, n_rounds, f, 10.0 * f, 0.5 * f, overhead)
            )
    return out


def side(
    records: list[dict[str, Any]],
    label: str,
    env: dict[str, Any] | None = None,
    cfg: dict[str, Any] | None = None,
    with_results: bool = True,
) -> Side:
    stored = StoredConfig.model_validate(cfg or config())
    env = env if env is not None else ENV
    results = build_results(records, stored, RunEnv.model_validate(env)) if with_results else None
    return side_from_records(records, stored, RunEnv.model_validate(env), label, results)


def _document(records: list[dict[str, Any]]) -> dict[str, Any]:
    """results.json as written for these records, read back as the dict a test edits."""
    doc: dict[str, Any] = json.loads(
        build_results(records, stored_config(), RunEnv.model_validate(ENV)).json_text()
    )
    return doc


def from_results(doc: dict[str, Any], label: str) -> Side:
    """A side from a results document edited as a dict here, read as results.json is read."""
    return side_from_results(RunResults.model_validate(doc), label)


def row(c: Any, metric: str) -> Any:
    (r,) = [r for r in c.rows if r.metric == metric]
    return r


# --------------------------------------------------------------------------------------------
# pure statistics


def test_samples_value_is_ratio_of_sums_and_identical_runs_are_unchanged() -> None:
    s = Samples(("a", "b"), (np.array([3.0, 1.0]), np.array([4.0, 4.0])))
    assert s.value == pytest.approx(0.5)
    t = exact_test(s, s)
    assert t.change == 0.0 and t.method == "exact (T=0, same prompts): identical"
    assert judge(METRICS["alpha"], 0.5, t, Thresholds()) == (UNCHANGED, 0.0)
    lower = Samples(("b", "a"), (np.array([1.0, 2.0]), np.array([4.0, 4.0])))  # keys reordered
    t2 = exact_test(s, lower)
    assert t2.method.endswith("differs") and t2.change == pytest.approx(-0.125)
    # deterministic: a difference beyond the minimum effect is a regression without a test
    assert judge(METRICS["alpha"], 0.5, t2, Thresholds())[0] == REGRESSED


def test_speedup_is_the_pooled_decode_throughput_ratio_as_in_the_report() -> None:
    # decode tokens (new_tokens − 1 turn) and decode ms per prompt, baseline then speculation:
    # p0 10 tokens in 100 ms → 50 ms; p1 20 tokens in 400 ms → 100 ms (docs/theory.md §9)
    def rec(kind: str, pid: str, tokens: int, ms: float) -> dict[str, Any]:
        return {"kind": kind, "prompt_id": pid, "new_tokens": tokens + 1, "ttft_ms": [5.0],
                "decode_ms": ms, "tpot_ms": ms / tokens}  # fmt: skip

    base = [rec("baseline", "p0", 10, 100.0), rec("baseline", "p1", 20, 400.0)]
    spec = [rec("spec", "p1", 20, 100.0), rec("spec", "p0", 10, 50.0)]
    s = speedup_samples(base, spec)
    # (30 / 150) / (30 / 500) = 10/3; the mean of per-prompt tokens/s would give 400/150 = 8/3
    assert s.value == pytest.approx(10 / 3)
    assert s.keys == ("p1#0", "p0#0")
    doubled = sum_by_key([s, s])  # two runs merged: the pooled ratio is unchanged
    assert doubled.value == pytest.approx(10 / 3) and doubled.keys == ("p0#0", "p1#0")
    itl, tps = timing_samples(base)  # pooled too: Σ ms / Σ tokens, not a mean of TPOTs
    assert itl.value == pytest.approx(500 / 30) and tps.value == pytest.approx(60.0)


def test_model_test_adds_the_run_to_run_term_to_the_prompt_bootstrap() -> None:
    keys = tuple(f"p{i}" for i in range(30))
    rng = np.random.default_rng(3)
    base_v = rng.lognormal(0.0, 0.2, 30)
    base = Samples(keys, (base_v, np.ones(30)))
    # the same prompts, each 10 % faster: paired, the shift is certain from the prompts alone
    shifted = Samples(keys[::-1], ((base_v * 1.1)[::-1], np.ones(30)))
    prompts_only = model_test(base, shifted, True, Thresholds(), 0.0, 1, 1)
    assert prompts_only.method == "paired bootstrap over 30 prompts"
    assert prompts_only.se == pytest.approx(0.0, abs=1e-12) and prompts_only.p_value == 0.0
    # with a 7 % run-to-run CV per run: se = 0.07·√2, the p of log 1.1 follows the normal
    with_runs = model_test(base, shifted, True, Thresholds(), 0.07, 1, 1)
    assert with_runs.se == pytest.approx(0.07 * math.sqrt(2))
    assert with_runs.p_value == pytest.approx(2 * stats.norm.sf(math.log(1.1) / (0.07 * 2**0.5)))
    # three runs per side: the run term shrinks as √(1/3 + 1/3)
    three = model_test(base, shifted, True, Thresholds(), 0.07, 3, 3)
    assert three.se == pytest.approx(0.07 * math.sqrt(2 / 3))
    other = Samples(tuple(f"q{i}" for i in range(25)), (rng.lognormal(0.0, 0.2, 25), np.ones(25)))
    t2 = model_test(base, other, True, Thresholds(), 0.0, 1, 1)
    assert t2.method.startswith("two-sample bootstrap (30 vs 25")
    assert t2.p_value is not None and t2.p_value > 0.01
    few = Samples(("a",), (np.array([1.0]), np.array([1.0])))
    assert model_test(few, few, True, Thresholds(), 0.07, 1, 1).p_value is None


def test_normal_difference_from_stored_cis_matches_hand_computation() -> None:
    base, new = Summary(1.0, 0.9, 1.1), Summary(0.8, 0.7, 0.9)
    t = normal_difference(base, new, ci_level=0.95, level=0.95)
    se = math.hypot(0.1 / 1.959964, 0.1 / 1.959964)  # CI half-width 0.1 on each side
    assert t.change == pytest.approx(-0.2)
    assert t.p_value == pytest.approx(2 * stats.norm.sf(0.2 / se), rel=1e-4)
    assert t.p_value == pytest.approx(0.005574, abs=2e-5)
    assert normal_difference(base, Summary(0.8, None, None), 0.95, 0.95).p_value is None


def test_judge_flags_a_significant_change_and_sizes_with_the_minimum_effect() -> None:
    """A tested row regresses on significance alone, in the bad direction; the minimum effect
    splits the rows that are not significant (unchanged within it, not significant beyond it)
    and is the only criterion of an exact (deterministic) comparison."""
    th = Thresholds()
    alpha, latency, speed = METRICS["alpha"], METRICS["itl_ms"], METRICS["speedup"]
    assert judge(alpha, 0.7, DiffTest(-0.05, 0.001, None, ""), th)[0] == REGRESSED
    assert judge(alpha, 0.7, DiffTest(-0.05, 0.20, None, ""), th)[0] == NOT_SIGNIFICANT
    assert judge(alpha, 0.7, DiffTest(-0.015, 0.20, None, ""), th)[0] == UNCHANGED  # < 0.02
    # significant though below the minimum effect: shown to be worse, so it regressed
    assert judge(alpha, 0.7, DiffTest(-0.015, 0.001, None, ""), th)[0] == REGRESSED
    exact = "exact (T=0, same prompts): differs"
    assert judge(alpha, 0.7, DiffTest(-0.015, None, None, exact), th)[0] == UNCHANGED
    assert judge(alpha, 0.7, DiffTest(-0.025, None, None, exact), th)[0] == REGRESSED
    assert judge(alpha, 0.7, DiffTest(+0.05, 0.001, None, ""), th)[0] == IMPROVED
    assert judge(latency, 10.0, DiffTest(+0.6, 0.01, None, ""), th) == (
        REGRESSED,
        pytest.approx(0.06),
    )
    assert judge(latency, 10.0, DiffTest(-0.6, 0.01, None, ""), th)[0] == IMPROVED
    assert judge(speed, 2.0, DiffTest(-0.09, 0.10, None, ""), th)[0] == UNCHANGED  # −4.5 % < 5 %
    assert judge(speed, 2.0, DiffTest(-0.22, 0.01, None, ""), Thresholds(speedup_drop=0.1))[0] == (
        REGRESSED
    )
    # the adjusted p decides: raw 0.01 significant, Holm-adjusted 0.08 not
    assert judge(speed, 2.0, DiffTest(-0.22, 0.01, None, ""), th, 0.08)[0] == NOT_SIGNIFICANT


# --------------------------------------------------------------------------------------------
# synthetic pairs of runs


STEADY = Thresholds(run_to_run_cv=0.0)  # a machine without run-to-run noise (synthetic runs)


@pytest.fixture(scope="module")
def base_records() -> list[dict[str, Any]]:
    return make_records(seed=100)


@pytest.fixture(scope="module")
def planted(base_records: list[dict[str, Any]]) -> Any:
    """α − 0.05 at every position and 0.3 ms more overhead per round: speedup about −10 %. The
    synthetic runs have no run-to-run noise, so the run-to-run term is set to 0 here."""
    new = make_records(seed=101, alpha_shift=-0.05, overhead=0.3)
    return compare(side(base_records, "base"), side(new, "new"), STEADY)


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_planted_regression_is_flagged(planted: Any, base_records: list[dict[str, Any]]) -> None:
    c = planted
    alpha = row(c, "alpha")
    assert alpha.status == REGRESSED
    assert alpha.change == pytest.approx(-0.05, abs=0.015)
    assert alpha.method == "paired bootstrap over 40 prompts" and alpha.p_value < 0.01
    assert alpha.p_value >= alpha.raw_p_value  # Holm-adjusted
    speed = row(c, "speedup@4")
    assert speed.status == REGRESSED
    assert speed.relative_change == pytest.approx(-0.10, abs=0.03)
    assert row(c, "accepted_length@4").status == REGRESSED
    # absolute timing, one run per side: reported, not gated, and the row says why
    itl = row(c, "itl_ms@4")
    assert itl.status == INFORMATIONAL and itl.relative_change > 0.05
    assert "one run per side cannot measure" in itl.reason
    assert row(c, "baseline_itl_ms").status == INFORMATIONAL
    assert row(c, "verdict").status == UNCHANGED  # still ON
    assert (
        c.tested == 2
    )  # the gating rows α and speedup at the recommended γ (τ, speedup@4 outside Holm)
    assert not speed.gating and row(c, "speedup_recommended").gating
    assert c.exit_code == 1
    # with this machine's run-to-run CV (7 %) one run per side cannot see −10 % on speedup, but
    # the acceptance drop still fails the gate, and each row says what it could detect
    real = compare(side(base_records, "base"), side(new_records_planted(), "new"), Thresholds())
    assert row(real, "speedup@4").status in (NOT_SIGNIFICANT, UNCHANGED)
    assert row(real, "speedup@4").mde == pytest.approx(0.30, abs=0.1)
    assert "runs" in row(real, "speedup@4").needs
    assert row(real, "alpha").status == REGRESSED and real.exit_code == 1


def new_records_planted() -> list[dict[str, Any]]:
    return make_records(seed=101, alpha_shift=-0.05, overhead=0.3)


@pytest.mark.slow  # seconds, not milliseconds: make test runs it, make test-fast does not
def test_runs_from_one_distribution_are_not_flagged_in_95_percent_of_200() -> None:
    th = Thresholds(bootstrap=1000, run_to_run_cv=0.0)
    # the test alone, no minimum effect: a two-sided 5 % test should fire about 5 % of the time
    zero = Thresholds(
        bootstrap=1000, alpha_drop=0, accepted_length_drop=0, speedup_drop=0, latency_rise=0,
        throughput_drop=0, run_to_run_cv=0.0,
    )  # fmt: skip
    flagged = []
    significant: dict[str, int] = {}
    for rep in range(200):
        a = side(make_records(2 * rep), "a", with_results=False)
        b = side(make_records(2 * rep + 1), "b", with_results=False)
        c = compare(a, b, th)
        assert len(c.rows) == 7  # α, τ, baseline ITL and tokens/s, ITL, tokens/s, speedup @γ=4
        if c.exit_code == 1:
            flagged.append((rep, [r.metric for r in c.regressions]))
        for r in compare(a, b, zero).rows:
            if r.raw_p_value is not None:  # the unadjusted per-row test
                significant[r.metric] = significant.get(r.metric, 0) + (r.raw_p_value < 0.05)
    assert len(flagged) <= 10, flagged
    # calibration of each row's own test (bootstrap se, t reference) at n = 40 prompts
    assert set(significant) == {"alpha", "accepted_length@4", "speedup@4"}
    for metric, k in significant.items():
        assert 3 <= k <= 20, (metric, k)


def test_mismatched_models_or_sampling_are_identity_differences(
    base_records: list[dict[str, Any]],
) -> None:
    a = side(base_records, "a", with_results=False)
    other = config(target="another-target")
    other["sampling"] = {"temperatures": [1.0], "top_p": 0.9, "top_k": 0}
    b = side(base_records, "b", cfg=other, with_results=False)
    diffs = {d.field: (d.base, d.new) for d in identity_differences(a, b)}
    assert diffs == {"target model": ("tiny-target", "another-target"), "top_p": (1.0, 0.9)}
    assert identity_differences(a, side(base_records, "c", with_results=False)) == []


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_different_hardware_is_listed_and_never_disqualifies_within_run_ratios(
    base_records: list[dict[str, Any]],
) -> None:
    new = make_records(seed=101, alpha_shift=-0.05, overhead=0.3)
    gpu_env = {**ENV, "device": "cuda:0", "gpu": "NVIDIA H200"}
    c = compare(side(base_records, "base"), side(new, "new", env=gpu_env), STEADY)
    assert {d.field for d in c.env_differences} == {"device", "gpu"}
    for r in c.rows:
        if r.kind == "timing":  # absolute timing across an environment change: not gated
            assert r.status == INFORMATIONAL and "environment differs (device, gpu)" in r.reason
        elif r.metric != "verdict":
            assert r.status == REGRESSED, r  # α, τ and speedup still gated (the drop is real)
    assert c.exit_code == 1
    # the environment change declared the subject (a driver / hardware upgrade): timing gates
    subj = compare(side(base_records, "base"), side(new, "new", env=gpu_env), STEADY, subject="env")
    itl = row(subj, "itl_ms@4")
    assert itl.status in (REGRESSED, NOT_SIGNIFICANT) and itl.raw_p_value is not None
    assert "run-to-run CV 95.0 %" in itl.method  # the absolute-timing CV measured here


def test_engine_runs_compare_the_server_environment_not_the_client() -> None:
    from specbench.analysis.compare.environment import env_differences

    recs = make_records(seed=1, n_prompts=4, n_rounds=4)
    server = {"backend": "vllm", "vllm": "0.9.0", "gpu": "H100", "cpu": "client A"}
    a = side(recs, "a", env=server, with_results=False)
    b = side(recs, "b", env={**server, "vllm": "0.10.0", "cpu": "client B"}, with_results=False)
    assert [(d.field, d.base, d.new) for d in env_differences(a, b)] == [
        ("vllm", "0.9.0", "0.10.0")
    ]


def test_unstable_timing_is_noted_and_no_longer_blocks_speedup(
    base_records: list[dict[str, Any]],
) -> None:
    results = _document(base_records)
    shaky = copy.deepcopy(results)
    shaky["workloads"][0]["warnings"] = ["unstable timing: draft step time CV 173%"]
    slow = copy.deepcopy(results)
    for g in slow["workloads"][0]["gammas"]:
        if g["measured"]:
            g["measured_speedup"] = {"value": 2.0, "ci95": [1.9, 2.1]}
    base_speed = results["workloads"][0]["gammas"][3]["measured_speedup"]["value"]
    assert base_speed > 2.4
    gate_speedup = Thresholds(run_to_run_cv=0.0, gate=("speedup",))  # the speedup @γ rows gate
    c = compare(from_results(shaky, "a"), from_results(slow, "b"), gate_speedup)
    assert row(c, "speedup@4").status == REGRESSED and c.exit_code == 1
    assert any("flagged unstable timing in w T=1" in n for n in c.notes)


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_results_json_only_uses_stored_cis_and_says_so(
    base_records: list[dict[str, Any]],
) -> None:
    new = make_records(seed=101, alpha_shift=-0.05, overhead=0.3)
    base_res = _document(base_records)
    new_res = _document(new)
    c = compare(from_results(base_res, "a"), from_results(new_res, "b"), STEADY)
    assert c.mode == "stored CIs (normal approximation)"
    assert any("normal approximation" in n for n in c.notes)
    alpha = row(c, "alpha")
    assert alpha.status == REGRESSED and alpha.method == "normal approximation from stored CIs"
    assert row(c, "speedup@4").status == REGRESSED
    # a run directory against a results.json: also the normal approximation
    mixed = compare(side(base_records, "a"), from_results(new_res, "b"), STEADY)
    assert mixed.mode == c.mode and row(mixed, "alpha").status == REGRESSED


def _turned_off(results: dict[str, Any]) -> dict[str, Any]:
    off = copy.deepcopy(results)
    rec = off["workloads"][0]["recommendation"]
    rec.update(verdict="off", gamma=0, speedup=None, drafter=None, policy=None)
    return off


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_verdict_flip_is_always_listed_and_fails_when_the_speedup_behind_it_regressed(
    base_records: list[dict[str, Any]],
) -> None:
    results = _document(base_records)
    assert results["workloads"][0]["recommendation"]["verdict"] == "on"
    # a flip on noise: same speedup at the recommended γ in both runs → listed, not a regression
    noise = compare(
        from_results(results, "a"), from_results(_turned_off(results), "b"), Thresholds()
    )
    verdict = row(noise, "verdict")
    assert (verdict.base, verdict.new) == ("ON γ=4", "OFF (best measured γ=4)")
    # with this machine's run-to-run CV (7 %) one run per side cannot see the speedup's −5 %:
    # the flip cannot be judged either, and the comparison is inconclusive (exit 5), not ✅
    assert verdict.status == INCONCLUSIVE and "verdict flip ON → OFF" in verdict.note
    assert "cannot detect its minimum effect" in verdict.note and noise.exit_code == 5
    assert "| recommendation (optimal γ, verdict) |" in to_markdown(noise)  # never collapsed
    rec = row(noise, "speedup_recommended")
    assert rec.label == "speedup at recommended γ=4" and rec.status == INCONCLUSIVE
    # a gate that can see its minimum effect (no run-to-run noise, a 30 % minimum drop, within
    # the stored CIs' reach) judges the same flip: near its threshold, not a regression
    sized = Thresholds(run_to_run_cv=0.0, speedup_drop=0.3)
    steady = compare(from_results(results, "a"), from_results(_turned_off(results), "b"), sized)
    assert steady.exit_code == 0
    assert row(steady, "verdict").status == NOT_SIGNIFICANT
    assert "near its threshold" in row(steady, "verdict").note
    # a flip behind which the speedup really dropped (α − 0.05, +0.3 ms a round): a regression
    worse = _document(make_records(seed=101, alpha_shift=-0.05, overhead=0.3))
    real = compare(from_results(results, "a"), from_results(_turned_off(worse), "b"), STEADY)
    assert row(real, "speedup_recommended").status == REGRESSED
    assert row(real, "verdict").status == REGRESSED and real.exit_code == 1
    back = compare(from_results(_turned_off(worse), "a"), from_results(results, "b"), STEADY)
    assert row(back, "verdict").status == IMPROVED


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_a_slower_machine_moves_absolute_timing_only_informationally(
    base_records: list[dict[str, Any]],
) -> None:
    slow = copy.deepcopy(base_records)
    for r in slow:  # the same code on a machine 20 % slower: every timing scales
        r["tpot_ms"] *= 1.2
        r["decode_ms"] *= 1.2
    c = compare(side(base_records, "a"), side(slow, "b"), STEADY)
    assert {r.status for r in c.rows if r.kind == "timing"} == {INFORMATIONAL}
    assert row(c, "baseline_itl_ms").relative_change == pytest.approx(0.2)
    assert {r.status for r in c.rows if r.kind != "timing"} == {UNCHANGED}  # ratios held
    assert c.exit_code == 0


def test_several_runs_per_side_gate_absolute_timing_with_runs_as_the_unit() -> None:
    base = [side(make_records(seed=s, n_rounds=10), f"b{s}", with_results=False) for s in (1, 2, 3)]
    same = [side(make_records(seed=s, n_rounds=10), f"n{s}", with_results=False) for s in (4, 5, 6)]
    slow_recs = [make_records(seed=s, n_rounds=10) for s in (7, 8, 9)]
    for recs in slow_recs:
        for r in recs:
            r["tpot_ms"] *= 1.5
            r["decode_ms"] *= 1.5
    slow = [side(r, f"s{i}", with_results=False) for i, r in enumerate(slow_recs)]
    th = Thresholds(gate=("alpha", "baseline_itl_ms"))  # absolute ITL declared a gating row
    c = compare(merge_runs(base), merge_runs(same), th)
    assert c.runs == (3, 3)
    itl = row(c, "baseline_itl_ms")
    assert itl.method == "Welch t over runs (3 vs 3 runs)" and itl.status != INFORMATIONAL
    assert itl.gating and c.exit_code == 0
    worse = compare(merge_runs(base), merge_runs(slow), th)
    assert row(worse, "baseline_itl_ms").status == REGRESSED and worse.exit_code == 1
    assert row(worse, "speedup@4").status == UNCHANGED  # spec and baseline slowed together


def test_failed_and_missing_rows_are_listed_and_fail_under_strict(
    base_records: list[dict[str, Any]],
) -> None:
    new = [r for r in make_records(seed=5, gammas=(2, 4)) if r.get("gamma") != 2]
    failed = copy.deepcopy(next(r for r in new if r["kind"] == "spec"))
    failed.update(kind="failed", status="failed", prompt_id="p99", error="HTTP 429")
    base = side(make_records(seed=4, gammas=(2, 4)), "a", with_results=False)
    n = side([*new, failed], "b", with_results=False)
    lenient = compare(base, n, Thresholds())
    assert lenient.failures == [
        "failed in new: w T=1 model/fixed γ=4: 1 failed record",
        "missing in new: w T=1 settings model γ=2",
    ]
    assert lenient.exit_code == 0
    assert compare(base, n, Thresholds(), strict=True).exit_code == 1
    assert "failed/missing: failed in new" in to_markdown(lenient)


# --------------------------------------------------------------------------------------------
# outputs parse back


def test_junit_is_well_formed_one_case_per_metric(planted: Any) -> None:
    root = ET.fromstring(to_junit(planted))
    assert root.tag == "testsuites"
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(planted.rows) == int(root.get("tests"))
    failures = root.findall("./testsuite/testcase/failure")
    assert len(failures) == len(planted.regressions) == int(root.get("failures"))
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "w T=1" and int(suite.get("failures")) == len(failures)
    names = {c.get("name") for c in cases if c.find("failure") is not None}
    assert "α (exact β)" in names
    # τ and speedup @γ regressed too, but they are not gating rows: reported, never failures
    assert not {"speedup @γ=4", "accepted length τ @γ=4"} & names
    assert row(planted, "speedup@4").status == REGRESSED
    alpha_fail = next(c for c in cases if c.get("name") == "α (exact β)").find("failure")
    assert alpha_fail is not None and "regressed" in alpha_fail.get("message", "")


def _markdown_table(text: str) -> list[list[str]]:
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    header, sep, *body = lines
    assert set(sep.replace("|", "").replace("-", "").replace(":", "")) == set()
    cells = [[c.strip() for c in ln.strip("|").split(" | ")] for ln in [header, *body]]
    assert all(len(c) == len(cells[0]) == 10 for c in cells)
    return cells[1:]


def test_markdown_is_a_pr_comment_and_parses_back(planted: Any) -> None:
    md = to_markdown(planted)
    assert md.startswith("## ❌ specbench compare: ")
    rows = _markdown_table(md)
    listed = [r for r in planted.rows if r.status not in (UNCHANGED, INFORMATIONAL)]
    assert len(rows) == len(listed)
    by_metric = {r[2]: r for r in rows}
    assert by_metric["α (exact β)"][8] == "**regressed**"
    assert by_metric["speedup @γ=4"][8] == "**regressed (not gated)**"
    # the MDE of a ratio is the detectable drop, "−x %"
    assert by_metric["speedup @γ=4"][7].startswith("−") and by_metric["speedup @γ=4"][7].endswith(
        "%"
    )
    assert by_metric["speedup @γ=4"][5].endswith("%") and by_metric["speedup @γ=4"][5][0] == "-"
    n_unchanged = sum(r.status == UNCHANGED for r in planted.rows)
    if n_unchanged:
        assert f"{n_unchanged} rows unchanged" in md
    assert "Exit code 1" in md


def test_json_document_is_strict_json(planted: Any) -> None:
    doc = json.loads(json.dumps(to_dict(planted), allow_nan=False))
    assert doc["exit_code"] == 1 and doc["regressions"] == len(planted.regressions)
    assert len(doc["rows"]) == len(planted.rows)
    assert doc["thresholds"]["alpha_drop"] == 0.02
    assert {r["status"] for r in doc["rows"]} <= {
        REGRESSED, IMPROVED, UNCHANGED, NOT_SIGNIFICANT, INFORMATIONAL, INCONCLUSIVE
    }  # fmt: skip
    assert doc["tested_rows"] == planted.tested and doc["schema"] == 3
    assert doc["verdict"] == "regression" and doc["inconclusive"] == len(planted.inconclusive)
