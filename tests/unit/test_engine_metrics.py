"""Engine counters: Prometheus parsing, diffing, conversion to specbench's estimators, the engine
results entry, the conformance test and the engine report sections — all without vLLM."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from specbench.analysis.arithmetic import roi
from specbench.analysis.conformance.decision import compare
from specbench.analysis.conformance.reference_check import setting_mismatches
from specbench.analysis.conformance.units import engine_units
from specbench.analysis.documents.settings import AnalysisSettings
from specbench.analysis.estimators import acceptance
from specbench.analysis.estimators.groups import Group
from specbench.analysis.pipeline.serving_results import serving_entry
from specbench.analysis.serving.spec_counters import SpecCounters, estimates
from specbench.config import parse_config
from specbench.config.stored import StoredConfig
from specbench.errors import SpecbenchError
from specbench.harness.serving.metrics.metrics import (
    accept_length_gauge,
    parse_prometheus,
    spec_counters_from_samples,
    spec_counters_from_vllm_metrics,
)

# What vLLM 0.32's /metrics printed for a draft_model server at γ=3 (two data-parallel engines).
VLLM_V1 = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 6.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="tiny"} 4.0
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="tiny"} 1.7960269998707075e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny"} 18.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="tiny"} 12.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 11.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="tiny"} 7.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="0"} 5.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="1"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="2"} 2.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="tiny",position="0"} 3.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="tiny",position="1"} 2.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="tiny",position="2"} 2.0
vllm:num_requests_running{engine="0",model_name="tiny"} 0.0
"""


def test_parse_vllm_v1_sums_engines_and_positions() -> None:
    samples = parse_prometheus(VLLM_V1)
    c = spec_counters_from_samples(samples)
    assert c == SpecCounters(10.0, 30.0, 18.0, (8.0, 6.0, 4.0), "vllm")
    assert accept_length_gauge(samples) is None


def test_parse_vllm_v0_derives_drafts_from_emitted_tokens() -> None:
    text = (
        "vllm:spec_decode_num_accepted_tokens_total 12\n"
        "vllm:spec_decode_num_draft_tokens_total 20\n"
        "vllm:spec_decode_num_emitted_tokens_total 17\n"  # 5 rounds: 12 accepted + 5 bonus
        "vllm:spec_decode_draft_acceptance_rate 0.6\n"
    )
    c = spec_counters_from_samples(parse_prometheus(text))
    assert c is not None and (c.drafts, c.accepted, c.per_pos, c.source) == (
        5.0,
        12.0,
        (),
        "vllm_v0",
    )


def test_no_spec_metrics_and_sglang_gauge() -> None:
    plain = parse_prometheus('vllm:num_requests_running{engine="0"} 1\n# only comments\n')
    assert spec_counters_from_samples(plain) is None
    sg = parse_prometheus('sglang:spec_accept_length{model_name="m"} 2.75\n')
    assert spec_counters_from_samples(sg) is None
    assert accept_length_gauge(sg) == pytest.approx(2.75)


def test_diff_and_round_trip() -> None:
    before = SpecCounters(4, 12, 6, (3, 2, 1))
    after = SpecCounters(14, 42, 24, (11, 8, 5))
    d = after.minus(before)
    assert d == SpecCounters(10, 30, 18, (8, 6, 4))
    assert SpecCounters.from_dict(d.to_dict()) == d
    assert d.plus(before) == after


@dataclass
class Counter:
    name: str
    labels: dict[str, str]
    value: int


@dataclass
class Vector:
    name: str
    labels: dict[str, str]
    values: list[int]


def test_in_process_metrics_objects() -> None:
    metrics = [
        Counter("vllm:spec_decode_num_drafts", {}, 10),
        Counter("vllm:spec_decode_num_draft_tokens", {}, 30),
        Counter("vllm:spec_decode_num_accepted_tokens", {}, 18),
        Vector("vllm:spec_decode_num_accepted_tokens_per_pos", {}, [8, 6, 4]),
        Counter("vllm:prompt_tokens", {}, 999),
    ]
    assert spec_counters_from_vllm_metrics(metrics) == SpecCounters(10, 30, 18, (8, 6, 4))
    assert spec_counters_from_vllm_metrics([Counter("vllm:prompt_tokens", {}, 1)]) is None


def test_estimates_hand_computed() -> None:
    # 10 rounds at γ=3: 2 accepted nothing, 2 accepted 1, 2 accepted 2, 4 accepted all three.
    e = estimates(SpecCounters(10, 30, 18, (8, 6, 4)), 3)
    assert e.mean_accepted_length == pytest.approx(2.8)  # 1 + 18/10
    assert e.accepted_proposed == pytest.approx(0.6)  # 18/30
    assert e.accepted_tested == pytest.approx(0.75)  # 18 / (18 + 10 − 4)
    assert e.per_position == pytest.approx([0.8, 0.75, 4 / 6])
    assert e.per_position_rate == pytest.approx([0.8, 0.6, 0.4])
    assert e.histogram == [2, 2, 2, 4]
    assert e.truncation == pytest.approx({1: 1.8, 2: 2.4, 3: 2.8})
    assert e.alpha_from_length is not None
    assert roi.expected_tokens(3, e.alpha_from_length) == pytest.approx(2.8, abs=1e-6)


def test_counters_agree_with_the_per_round_estimators() -> None:
    """The counters an engine would report for a set of rounds give the same numbers as
    specbench's per-round estimators on those rounds."""
    rng = np.random.default_rng(3)
    gamma = 4
    acc = np.minimum(rng.geometric(0.35, size=500) - 1, gamma)
    dra = np.full_like(acc, gamma)
    c = SpecCounters(
        float(len(acc)),
        float(dra.sum()),
        float(acc.sum()),
        tuple(float((acc >= i).sum()) for i in range(1, gamma + 1)),
    )
    e = estimates(c, gamma)
    assert e.per_position == pytest.approx(acceptance.per_position_acceptance(acc, dra, gamma))
    # one pool of rounds (counters cannot tell prompts apart): ā(γ) = 1 + mean(min(A, γ))
    round_pooled = {g: 1 + float(np.minimum(acc, g).mean()) for g in range(1, gamma + 1)}
    assert e.truncation == pytest.approx(round_pooled)
    assert e.histogram == acceptance.accepted_histogram(acc, gamma)
    tested = np.minimum(acc + 1, dra).sum()
    assert e.accepted_tested == pytest.approx(acc.sum() / tested)


# ---------------------------------------------------------------------------------------------
# engine records → results entry


def _req(
    kind: str, pid: str, gamma: int, conc: int, tpot: float, counters: SpecCounters | None = None
) -> dict[str, Any]:
    n = 33
    e2e = 10.0 + tpot * (n - 1)
    rec = {
        "schema": 1,
        "kind": kind,
        "unit_kind": kind,
        "workload": "w",
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "gamma": gamma,
        "drafter": "draft_model" if gamma else "",
        "policy": "fixed" if gamma else "",
        "prompt_id": pid,
        "repeat": 0,
        "concurrency": conc,
        "backend": "vllm",
        "status": "ok",
        "turns": 1,
        "new_tokens": n,
        "ttft_ms": [10.0],
        "e2e_ms": [e2e],
        "wall_ms": e2e,
        "decode_ms": e2e - 10.0,
        "tokens_per_s": n / e2e * 1000,
        "tpot_ms": tpot,
        "output_ids": [[1, 2, 3]],
    }
    if counters is not None:
        rec["spec_counters"] = counters.to_dict()
    return rec


def _metrics(gamma: int, conc: int, c: SpecCounters | None, tps: float) -> dict[str, Any]:
    return {
        "schema": 1,
        "kind": "engine_metrics",
        "unit_kind": "spec" if gamma else "baseline",
        "workload": "w",
        "temperature": 0.0,
        "gamma": gamma,
        "drafter": "draft_model" if gamma else "",
        "repeat": 0,
        "concurrency": conc,
        "metrics_available": True,
        "spec_counters": c.to_dict() if c else None,
        "output_tokens_per_s": tps,
    }


def synthetic_engine_run(n: int = 12) -> list[dict[str, Any]]:
    """Baseline TPOT 10 ms at both concurrencies; γ=3 halves it at c=1 but is 5 % slower at c=8."""
    rng = np.random.default_rng(0)
    recs: list[dict[str, Any]] = []
    total = SpecCounters(0, 0, 0, (0, 0, 0))
    for i in range(n):
        pid = f"p{i}"
        jitter = float(rng.normal(0, 0.2))
        recs.append(_req("baseline", pid, 0, 1, 10.0 + jitter))
        recs.append(_req("baseline", pid, 0, 8, 12.0 + jitter))
        c = SpecCounters(10, 30, 18, (8, 6, 4))
        total = total.plus(c)
        recs.append(_req("spec", pid, 3, 1, 5.0 + jitter, c))
        recs.append(_req("spec", pid, 3, 8, 12.6 + jitter))
    recs += [
        _metrics(0, 1, None, 100.0),
        _metrics(0, 8, None, 600.0),
        _metrics(3, 1, total, 200.0),
        _metrics(3, 8, total, 570.0),
    ]
    return recs


def test_engine_entry_acceptance_speedup_and_concurrency() -> None:
    recs = synthetic_engine_run()
    grp = Group(
        baseline=[r for r in recs if r["kind"] == "baseline"],
        spec={("model", "fixed", 3): [r for r in recs if r["kind"] == "spec"]},
        failed=[],
        metrics=[r for r in recs if r["kind"] == "engine_metrics"],
    )
    e, _, _ = serving_entry(("w", 0.0), grp, AnalysisSettings(n_boot=500))
    assert e.alpha is not None and e.alpha.estimator == "accepted_tested"
    assert e.alpha.value == pytest.approx(0.75)
    assert e.alpha_estimators is not None and e.alpha_estimators.mean_accepted_length is not None
    assert e.alpha_estimators.mean_accepted_length.value == pytest.approx(2.8)
    assert e.per_position_acceptance == pytest.approx([0.8, 0.75, 4 / 6])
    assert e.engine is not None and e.engine.acceptance_source == "per_request_counters"
    row3 = next(g for g in e.gammas if g.gamma == 3)
    assert row3.measured_speedup is not None
    assert row3.measured_speedup.value == pytest.approx(2.0, rel=0.05)  # 1/5 ÷ 1/10
    assert e.recommendation.verdict == "on" and e.recommendation.gamma == 3
    c8 = next(r for r in e.engine.concurrency if r.concurrency == 8)
    cell = c8.gammas["3"]
    assert cell.speedup is not None
    assert cell.speedup.value == pytest.approx(12.0 / 12.6, rel=0.02)
    assert cell.throughput_ratio == pytest.approx(0.95)
    stops = e.engine.stops_paying["3"]
    assert (stops.pays_at, stops.stops_paying_at, stops.never_pays) == ([1], 8, False)
    assert e.engine.chosen_stops_paying_at == 8


def test_engine_entry_without_counters_marks_acceptance_unavailable() -> None:
    recs = [r for r in synthetic_engine_run() if r["kind"] != "engine_metrics"]
    for r in recs:
        r.pop("spec_counters", None)
    grp = Group(
        baseline=[r for r in recs if r["kind"] == "baseline"],
        spec={("model", "fixed", 3): [r for r in recs if r["kind"] == "spec"]},
        failed=[],
        metrics=[],
    )
    e, _, _ = serving_entry(("w", 0.0), grp, AnalysisSettings(n_boot=300))
    assert e.alpha is None
    assert any("acceptance unavailable" in w for w in e.warnings)
    assert e.gammas == []  # nothing to predict without acceptance; speedup still measured
    assert e.engine is not None
    speedup = e.engine.concurrency[0].gammas["3"].speedup
    assert speedup is not None and speedup.value == pytest.approx(2.0, rel=0.05)


# ---------------------------------------------------------------------------------------------
# conformance


def _units(
    acc_per_round: list[list[int]], gamma: int
) -> dict[str, tuple[float, float, np.ndarray]]:
    out = {}
    for i, rounds in enumerate(acc_per_round):
        a = np.asarray(rounds)
        out[f"p{i}"] = (
            float(a.sum()),
            float(len(a)),
            np.asarray([(a >= k).sum() for k in range(1, gamma + 1)], float),
        )
    return out


def test_conformance_flags_a_shortfall_and_passes_equal_acceptance() -> None:
    rng = np.random.default_rng(1)
    ref_rounds = [list(np.minimum(rng.geometric(0.3, 30) - 1, 4)) for _ in range(20)]
    low_rounds = [list(np.minimum(rng.geometric(0.6, 30) - 1, 4)) for _ in range(20)]
    ref = _units(ref_rounds, 4)
    same = compare(ref, ref, 4, 500, 0.95, 0.05)
    assert same.verdict == "ok" and same.tau is not None and same.tau.diff == 0.0
    low = compare(_units(low_rounds, 4), ref, 4, 500, 0.95, 0.05)
    assert low.verdict == "shortfall" and low.tau is not None
    hi = low.tau.ci95[1]
    assert hi is not None and hi < 0
    assert low.tau.relative_shortfall > 0.05
    assert compare(ref, {}, 4, 100, 0.95, 0.05).verdict == "insufficient"


def test_conformance_engine_units_use_the_lowest_concurrency() -> None:
    units = engine_units(synthetic_engine_run(4), "w", 0.0, 3)
    assert set(units) == {"p0", "p1", "p2", "p3"}
    assert units["p0"][0] == 18 and units["p0"][1] == 10
    assert list(units["p0"][2]) == [8, 6, 4]


def test_setting_mismatches_name_the_causes() -> None:
    cfg = {
        "backend": "vllm",
        "sampling": {"temperatures": [0.0, 1.0], "top_p": 1.0, "top_k": 0},
        "engine": {"dtype": "bfloat16"},
        "target": {"dtype": "float32"},
        "speculative": {"method": "draft_model", "options": {}},
        "chat_template": "auto",
        "max_new_tokens": 48,
    }
    ref = {
        "sampling": {"top_p": 0.9, "top_k": 0},
        "target": {"dtype": "float32"},
        "chat_template": "auto",
        "max_new_tokens": 48,
    }
    kinds = {
        k
        for k, _ in setting_mismatches(
            StoredConfig.model_validate(cfg), StoredConfig.model_validate(ref)
        )
    }
    assert kinds == {"sampling", "dtype"}


# ---------------------------------------------------------------------------------------------
# config and the report, end to end without an engine


def test_engine_config_keys() -> None:
    cfg = parse_config(
        {
            "backend": "vllm",
            "target": {"model": "tiny-target"},
            "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
            "speculative": {
                "method": "draft_model",
                "model": "tiny-draft",
                "num_speculative_tokens": [4, 2],
            },
            "concurrency": [16, 1, 4],
            "engine": {"gpu_memory_utilization": 0.3, "extra": {"max_num_seqs": 8}},
        }
    )
    assert cfg.gammas == [2, 4] and cfg.concurrency == [1, 4, 16]
    assert cfg.draft.method == "model" and cfg.draft.model == "tiny-draft"
    with pytest.raises(
        SpecbenchError, match=re.escape("unknown key 'speculative.methd'; did you mean 'method'")
    ):
        parse_config({**_minimal(), "speculative": {"methd": "ngram"}})
    with pytest.raises(
        SpecbenchError, match=re.escape("unknown key 'server.ur'; did you mean 'url'")
    ):
        parse_config({**_minimal(), "backend": "openai", "server": {"ur": "http://x"}})
    with pytest.raises(SpecbenchError, match="concurrency"):
        parse_config({**_minimal(), "concurrency": [0]})


def _minimal() -> dict[str, Any]:
    return {
        "backend": "vllm",
        "target": {"model": "t"},
        "workloads": [{"name": "w", "dataset": {"name": "tiny_code"}}],
    }


@pytest.mark.slow  # seconds, not milliseconds: make test runs it, make test-fast does not
def test_report_renders_an_engine_run(tmp_path: Path) -> None:
    from specbench.cli.report import write_reports

    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in synthetic_engine_run())
    )
    cfg = {
        **_minimal(),
        "name": "eng",
        "concurrency": [1, 8],
        "gammas": [3],
        "decision": {"bootstrap": 300},
    }
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    results, _ = write_reports(run)  # the typed RunResults
    md = (run / "report.md").read_text()
    assert "## Engine: speedup against concurrency" in md
    assert "γ=3 stops paying at concurrency 8 (pays at 1)" in md
    assert (run / "plots" / "concurrency_w_T0.png").stat().st_size > 0
    assert results.workloads[0].recommendation.gamma == 3
