"""`specbench verify` on the shipped tiny pair: the exact sampler passes at every emitted position
(bonus included) for the draft model and for n-gram lookup; faults injected into the real
acceptance path (a wrong correction, the bonus from the wrong row, a wrong row only at
position 3, an n-gram residual that keeps the rejected token) fail at the position they break;
the lossy rule's drift and extra acceptance are measured, greedy mismatches are reported (the
pure statistics and the closed form of the first emitted token: tests/unit/tensors/test_verify_statistics.py,
tests/unit/tensors/test_acceptance_rules.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

import specbench.harness.verify.verify_checks as checks_mod
from specbench.analysis.verify.lossless_tests import bonferroni
from specbench.analysis.verify.verify_results import ContextCheck
from specbench.cli.app import app
from specbench.config import DatasetSpec, DraftSpec, WorkloadSpec
from specbench.data import load_workload
from specbench.decoding.acceptance_rules import (
    LossyRule,
    RoundDecision,
    accept_draft,
    exact_beta,
)
from specbench.decoding.drafters import NgramDrafter
from specbench.decoding.generate import baseline_generate
from specbench.decoding.lm import CachedLM, MemoizedLM
from specbench.decoding.sampling import process_logits, sample
from specbench.decoding.timing import Clock
from specbench.harness.verify.verify import model_drafter_factory, ngram_drafter_factory
from specbench.harness.verify.verify_checks import Context, check_context, greedy_check
from specbench.sampling_params import SamplingParams

CLOCK = Clock(torch.device("cpu"))
HOT = SamplingParams(temperature=1.0)
TARGET, DRAFT = "tiny-target", "tiny-draft"
N_SAMPLES = 1000


def broken_rule(
    draft_tokens: torch.Tensor,
    p_target: torch.Tensor,
    q_draft: torch.Tensor | None,
    greedy: bool,
    generator: torch.Generator | None = None,
) -> RoundDecision:
    """BROKEN on purpose: after a rejection it resamples from p instead of norm(max(0, p − q)),
    so the first emitted token follows min(p, q) + (1 − β)·p, not p."""
    assert q_draft is not None and not greedy
    gamma = int(draft_tokens.shape[0])
    idx = torch.arange(gamma)
    u = torch.rand(gamma, generator=generator)
    rejected = (u * q_draft[idx, draft_tokens] >= p_target[idx, draft_tokens]).tolist()
    if True not in rejected:
        return RoundDecision(gamma, int(sample(p_target[gamma], generator)))
    n = rejected.index(True)
    return RoundDecision(n, int(sample(p_target[n], generator)))


def bonus_from_wrong_row(
    draft_tokens: torch.Tensor,
    p_target: torch.Tensor,
    q_draft: torch.Tensor | None,
    greedy: bool,
    generator: torch.Generator | None = None,
) -> RoundDecision:
    """BROKEN on purpose, inside the real rule: `accept_draft` itself, handed p rows whose bonus
    row (position γ+1) is the row of position γ. Acceptance and corrections are untouched, so
    only the bonus token is wrong — the defect a first-tokens-only test cannot see."""
    rows = p_target.clone()
    rows[-1] = p_target[-2]
    return accept_draft(draft_tokens, rows, q_draft, greedy, generator)


def deep_correction_from_wrong_row(
    draft_tokens: torch.Tensor,
    p_target: torch.Tensor,
    q_draft: torch.Tensor | None,
    greedy: bool,
    generator: torch.Generator | None = None,
) -> RoundDecision:
    """BROKEN on purpose, inside the real rule: `accept_draft` itself, handed p rows where the
    row of position 3 is that of position 2 — a correction at position 3 (and acceptance there)
    uses the wrong row; positions 1 and 2 stay exact."""
    rows = p_target.clone()
    if rows.shape[0] > 3:
        rows[2] = p_target[1]
    return accept_draft(draft_tokens, rows, q_draft, greedy, generator)


# --------------------------------------------------------------------------------------------
# pure statistics and the closed form


# --------------------------------------------------------------------------------------------
# on the tiny pair


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    """One intra-op thread: on a busy CPU, two threads turn a 10 ms tiny forward into 600 ms."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _lms(pair: Any) -> tuple[CachedLM, CachedLM]:
    v = pair.vocab.real_vocab_size
    return MemoizedLM(pair.target.model, v), MemoizedLM(pair.draft.model, v)


@pytest.fixture(scope="module")
def context(tiny_pair: Any) -> Context:
    """The prompt context (of 12 candidates) where the broken rule departs most from p."""
    tok = tiny_pair.target.tokenizer
    v = tiny_pair.vocab.real_vocab_size
    cands = []
    for name in ("tiny_code", "tiny_prose", "tiny_structured"):
        for pr in load_workload(WorkloadSpec(name=name, dataset=DatasetSpec(name=name)), 0)[:4]:
            ids = tok(pr.turns[0])["input_ids"]
            with torch.inference_mode():
                lt = tiny_pair.target.model(torch.tensor([ids])).logits[0, -1, :v]
                ld = tiny_pair.draft.model(torch.tensor([ids])).logits[0, -1, :v]
            p, q = process_logits(lt, HOT), process_logits(ld, HOT)
            broken = torch.minimum(p, q) + (1 - exact_beta(p, q)) * p
            cands.append((0.5 * float((broken - p).abs().sum()), Context(pr.id, name, ids)))
    cands.sort(key=lambda c: -c[0])
    assert cands[0][0] > 0.04, cands[:3]  # the test has power there
    return cands[0][1]


def _check(
    pair: Any, ctx: Context, rule: Any, seed: int = 0, gamma: int = 1, n: int = N_SAMPLES
) -> ContextCheck:
    target, draft = _lms(pair)
    make = model_drafter_factory(CLOCK, pair.eos_ids)
    # γ = 1: the second emitted token is the bonus token, drawn from p(· | context, y₁)
    return check_context(target, draft, make, ctx, HOT, gamma, n, CLOCK, seed, rule)


@torch.inference_mode()
def test_memoized_lm_returns_the_live_cache_logits(tiny_pair: Any) -> None:
    v = tiny_pair.vocab.real_vocab_size
    plain, memo = CachedLM(tiny_pair.target.model, v), MemoizedLM(tiny_pair.target.model, v)
    ops: list[tuple[str, Any]] = [
        ("feed", [5, 9, 12, 7]),
        ("feed", [3, 4]),
        ("rollback", 1),
        ("feed", [8]),
        ("reset", None),
        ("feed", [5, 9, 12, 7]),
        ("feed", [3, 4]),
        ("rollback", 2),
        ("feed", [11, 2, 6]),
        ("rollback", 3),
        ("feed", [3, 4]),
    ]
    for op, arg in ops:
        for lm in (plain, memo):
            out = getattr(lm, op)(*([arg] if arg is not None else []))
            if op == "feed":
                if lm is plain:
                    ref = out
                else:
                    assert torch.allclose(out, ref, atol=1e-5)
        assert memo.length == plain.length
    assert memo.hits >= 2 and memo.misses >= 3


def _position_p(c: ContextCheck, j: int) -> float:
    (t,) = [t for t in c.positions if t.position == j]
    assert t.tested, t
    return t.p_value


def test_exact_sampler_passes(tiny_pair: Any, context: Context) -> None:
    c = _check(tiny_pair, context, None)
    assert c.first.dof >= 5  # a real test: many bins at this context
    assert bonferroni(c.p_values(), 0.001)[1], c
    assert _position_p(c, 2) > 0.001  # the bonus token at γ = 1
    assert c.beta is not None and c.drift_tv_exact == pytest.approx(0.0, abs=1e-6)
    se = np.sqrt(c.beta * (1 - c.beta) / N_SAMPLES)
    assert abs(c.accept_rate - c.beta) < 4 * se + 1e-9  # y₁ accepted with probability β
    assert c.first.tv < 2 * c.first.tv_bound + 0.01


def test_broken_sampler_fails(tiny_pair: Any, context: Context) -> None:
    c = _check(tiny_pair, context, broken_rule)
    adjusted, passed = bonferroni(c.p_values(), 0.001)
    assert not passed and adjusted < 1e-8, c


@pytest.mark.slow
def test_every_position_and_the_bonus_are_tested_at_gamma_3(
    tiny_pair: Any, context: Context
) -> None:
    c = _check(tiny_pair, context, None, gamma=3, n=600)
    assert [t.position for t in c.positions] == [2, 3, 4]  # 4 = the bonus token at γ = 3
    assert all(t.tested and t.n >= 50 for t in c.positions), c.positions
    assert bonferroni(c.p_values(), 0.001)[1], c
    assert all(abs(t.mean_u - 0.5) < 0.1 for t in c.positions)  # PIT centred: tokens follow p


@pytest.mark.slow
def test_bonus_from_the_wrong_row_fails_at_the_bonus_only(tiny_pair: Any, context: Context) -> None:
    c = _check(tiny_pair, context, bonus_from_wrong_row, gamma=3, n=600)
    assert not bonferroni(c.p_values(), 0.001)[1]
    assert _position_p(c, 4) < 1e-8  # the bonus position fails …
    assert c.first.p_value > 1e-3 and _position_p(c, 2) > 1e-3  # … the untouched ones do not


@pytest.mark.slow
def test_wrong_deep_correction_fails_past_position_2(tiny_pair: Any, context: Context) -> None:
    c = _check(tiny_pair, context, deep_correction_from_wrong_row, gamma=3, n=600)
    assert not bonferroni(c.p_values(), 0.001)[1]
    assert _position_p(c, 3) < 1e-4
    assert c.first.p_value > 1e-3 and _position_p(c, 2) > 1e-3


NGRAM = DraftSpec(method="ngram", prompt_lookup_min=1, prompt_lookup_max=3)
WARM = SamplingParams(temperature=0.5)


def correction_from_p(
    draft_tokens: torch.Tensor,
    p_target: torch.Tensor,
    q_draft: torch.Tensor | None,
    greedy: bool,
    generator: torch.Generator | None = None,
) -> RoundDecision:
    """BROKEN on purpose: the real `accept_draft` decides, every rejection resamples from p — for
    an n-gram draft (one-hot q) that re-emits the rejected token instead of excluding it."""
    d = accept_draft(draft_tokens, p_target, q_draft, greedy, generator)
    if d.n_accepted < int(draft_tokens.shape[0]):
        return RoundDecision(d.n_accepted, int(sample(p_target[d.n_accepted], generator)))
    return d


@pytest.fixture(scope="module")
def ngram_context(tiny_pair: Any) -> Context:
    """The context (prompt + greedy answer) where n-gram lookup's first guess is likeliest."""
    tok = tiny_pair.target.tokenizer
    v = tiny_pair.vocab.real_vocab_size
    target = CachedLM(tiny_pair.target.model, v)
    cands = []
    for name in ("tiny_code", "tiny_structured"):
        for pr in load_workload(WorkloadSpec(name=name, dataset=DatasetSpec(name=name)), 0)[:4]:
            ids = tok(pr.turns[0])["input_ids"]
            with torch.inference_mode():
                gen = baseline_generate(target, ids, SamplingParams(), 12, CLOCK, tiny_pair.eos_ids)
                ids = ids + gen.output_ids
                drafter = NgramDrafter(1, 3, CLOCK)
                drafter.start(ids[:-1], ids[-1])
                y = drafter.propose(3).tokens
                if not y:
                    continue
                target.reset()
                p = process_logits(target.feed(ids, keep=1)[-1], WARM)
            cands.append((float(p[y[0]]), Context(pr.id, name, ids)))
    cands.sort(key=lambda c: -c[0])
    assert cands and cands[0][0] > 0.3, cands[:3]  # the one-hot path is exercised there
    return cands[0][1]


def _ngram_check(pair: Any, ctx: Context, rule: Any) -> ContextCheck:
    target, _ = _lms(pair)
    make = ngram_drafter_factory(NGRAM, CLOCK)
    return check_context(target, None, make, ctx, WARM, 3, N_SAMPLES, CLOCK, 0, rule)


@pytest.mark.slow
def test_ngram_drafter_is_lossless_and_a_broken_residual_fails(
    tiny_pair: Any, ngram_context: Context
) -> None:
    ok = _ngram_check(tiny_pair, ngram_context, None)
    assert ok.drafted >= 2 and ok.beta is None  # it proposed; no closed form without a q model
    assert ok.first.dof >= 1 and bonferroni(ok.p_values(), 0.001)[1], ok
    assert sum(t.tested for t in ok.positions) >= 1  # later positions reached and tested too
    bad = _ngram_check(tiny_pair, ngram_context, correction_from_p)
    assert bad.first.p_value < 1e-6


def test_lossy_rule_drift_and_extra_acceptance_are_measured(
    tiny_pair: Any, context: Context
) -> None:
    c = _check(tiny_pair, context, LossyRule(0.1))
    assert c.beta is not None and c.accept_expected is not None and c.drift_tv_exact is not None
    assert c.drift_tv_exact > 0.005  # closed form: the output is no longer p
    assert c.accept_expected > c.beta + 0.005  # … and it accepts more
    se = np.sqrt(c.accept_expected * (1 - c.accept_expected) / N_SAMPLES)
    # the sampler does what the closed form says, and accepts measurably more than β
    assert abs(c.accept_rate - c.accept_expected) <= 4 * se + 1e-9
    assert c.accept_rate - c.beta > 4 * np.sqrt(c.beta * (1 - c.beta) / N_SAMPLES)


@torch.inference_mode()
def test_greedy_identity_and_a_reported_mismatch(
    tiny_pair: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    v = tiny_pair.vocab.real_vocab_size
    target, draft = CachedLM(tiny_pair.target.model, v), CachedLM(tiny_pair.draft.model, v)
    tok = tiny_pair.target.tokenizer
    prompts = [
        Context(f"p{i}", "w", tok(t)["input_ids"]) for i, t in enumerate(["def f(x):", "The"])
    ]
    make = model_drafter_factory(CLOCK, tiny_pair.eos_ids)
    ok = greedy_check(target, draft, make, prompts, [1, 4], 16, CLOCK, tiny_pair.eos_ids)
    assert (ok.runs, ok.identical_runs, ok.identity_rate, ok.passed) == (4, 4, 1.0, True)
    assert ok.tokens_matching == ok.tokens_compared > 0

    real = checks_mod.speculative_generate

    def flipped(*args: Any, **kwargs: Any) -> Any:  # a speculative path that errs at position 3
        gen = real(*args, **kwargs)
        gen.output_ids[3] = (gen.output_ids[3] + 1) % v
        return gen

    monkeypatch.setattr(checks_mod, "speculative_generate", flipped)
    bad = greedy_check(target, draft, make, prompts[:1], [2], 16, CLOCK, tiny_pair.eos_ids)
    assert not bad.passed and bad.identity_rate == 0.0 and bad.tokens_matching == 3
    (m,) = bad.mismatches
    assert (m.prompt_id, m.gamma, m.position) == ("p0", 2, 3)
    assert m.logit_margin > 0 and not m.near_tie  # fp32: the target clearly preferred its token


# --------------------------------------------------------------------------------------------
# the command


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("verify") / "v.yaml"
    cfg = {
        "name": "verify",
        "target": {"model": TARGET, "dtype": "float32", "device": "cpu"},
        "draft": {"model": DRAFT, "dtype": "float32", "device": "cpu"},
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 2}],
        "sampling": {"temperatures": [0.0, 1.0]},
        "gammas": [1, 3],
        "max_new_tokens": 12,
        "cpu_threads": 1,
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


def test_cli_verify_passes_and_reports_json(tiny_config: Path) -> None:
    args = ["--contexts", "2", "--samples", "200", "--gamma", "2", "--json"]
    res = runner.invoke(app, ["verify", str(tiny_config), *args])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["passed"] is True and doc["rule"] == "exact" and doc["exit_code"] == 0
    assert doc["drafters"] == ["model", "ngram"]  # n-gram lookup added: the config has none
    assert [(g["drafter"], g["identity_rate"], g["runs"]) for g in doc["greedy"]] == [
        ("model", 1.0, 2),
        ("ngram", 1.0, 2),
    ]
    model, ngram = doc["sampling"]
    assert (model["temperature"], model["gamma"], model["samples"]) == (1.0, 2, 200)
    assert (model["drafter"], ngram["drafter"], len(model["contexts"])) == ("model", "ngram", 2)
    # every emitted position of the round: 2 and the bonus token 3 at γ = 2
    assert [t["position"] for t in model["contexts"][0]["positions"]] == [2, 3]
    mt = doc["multiple_testing"]
    assert mt["correction"] == "bonferroni" and mt["false_fail_rate_at_most"] == 0.001
    assert mt["tests"] >= 4 and doc["checks_run"] == mt["tests"] + 4


def test_cli_verify_lossy_rule_is_labelled_and_costed(tiny_config: Path) -> None:
    args = [
        "--temperature",
        "1",
        "--contexts",
        "1",
        "--samples",
        "200",
        "--gamma",
        "1",
        "--lossy-epsilon",
        "0.1",
    ]
    res = runner.invoke(app, ["verify", str(tiny_config), *args])
    assert res.exit_code in (0, 1), res.output  # 1 when the drift is detectable at this size
    assert "LOSSY" in res.output and "drift from the target" in res.output
    bad = runner.invoke(app, ["verify", str(tiny_config), "--lossy-epsilon", "1.5"])
    assert bad.exit_code == 2 and "--lossy-epsilon must be in (0, 1)" in bad.output


@pytest.mark.parametrize("how", ["option", "config"])
def test_cli_verify_refuses_a_non_finite_temperature(
    tiny_config: Path, tmp_path: Path, how: str
) -> None:
    """`temperatures: [.nan]` used to test nothing and print LOSSLESS."""
    if how == "option":
        res = runner.invoke(app, ["verify", str(tiny_config), "--temperature", "nan"])
    else:
        cfg = yaml.safe_load(tiny_config.read_text())
        cfg["sampling"]["temperatures"] = [float("nan")]
        path = tmp_path / "nan.yaml"
        path.write_text(yaml.safe_dump(cfg))
        res = runner.invoke(app, ["verify", str(path)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "temperature" in lines[0]
    assert "LOSSLESS" not in res.output
