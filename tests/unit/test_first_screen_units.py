"""The first screen's pure parts: warnings once per setting, tails, economics, the decision lines."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.analysis.documents.results_model import (
    Failure,
    GlobalRecommendation,
    PoolDecision,
    RunEnv,
    RunInfo,
    RunResults,
)
from specbench.analysis.documents.results_model_base import EstimateJSON, ModelPair, SettingSpeedup
from specbench.analysis.documents.results_model_engine import (
    ConcurrencyCell,
    ConcurrencyLatency,
    ConcurrencyRow,
    EngineSection,
)
from specbench.analysis.documents.results_model_workload import (
    GammaRow,
    ItlPair,
    Recommendation,
    WorkloadResult,
)
from specbench.analysis.serving.serving_cost import economics_section, latency_tails
from specbench.config.stored import StoredEconomics
from specbench.report.sections.text import (
    counts_line,
    decision_warnings,
    engine_header,
    grouped_warnings,
    pool_decision,
)

LOW_RATE = (
    "accepted/proposed is {:.2f} at γ=8 (< 0.4): speculation often costs latency at such rates"
)


def _row(gamma: int, **kw: Any) -> GammaRow:
    """A measured γ row holding only the figures a test reads."""
    none = ModelPair(iid=None, empirical=None)
    return GammaRow(
        gamma=gamma,
        measured=True,
        predicted_tokens_per_round=none,
        predicted_speedup=none,
        measured_speedup=None,
        **kw,
    )


def _entry(name: str, verdict: str, gamma: int, warnings: list[str], **kw: Any) -> dict[str, Any]:
    return {
        "workload": name,
        "temperature": 0.0,
        "warnings": warnings,
        "failed_units": kw.get("failed", 0),
        "recommendation": {"verdict": verdict, "gamma": gamma, "itl_ms": kw.get("itl")},
        "gammas": kw.get("gammas", []),
        "baseline_peak_memory_mb": kw.get("base_mem"),
    }


def _results(entries: list[dict[str, Any]], pool_gamma: int, failures: int = 0) -> RunResults:
    """Only the parts the first screen's sentences read (model_construct: no other field)."""
    workloads = [
        WorkloadResult.model_construct(
            workload=e["workload"],
            temperature=e["temperature"],
            warnings=e["warnings"],
            failed_units=e["failed_units"],
            recommendation=Recommendation.model_construct(
                verdict=e["recommendation"]["verdict"], gamma=e["recommendation"]["gamma"]
            ),
        )
        for e in entries
    ]
    pools = [PoolDecision.model_construct(temperature=0.0, gamma=pool_gamma)]
    return RunResults.model_construct(
        workloads=workloads,
        global_=GlobalRecommendation.model_construct(by_temperature=pools),
        failures=[Failure.model_construct()] * failures,
    )


def _pool(**kw: Any) -> PoolDecision:
    return PoolDecision.model_validate(
        {"workloads": [], "speedup": None, "on_for": [], "off_for": [], "not_measured": [], **kw}
    )


def test_same_warning_in_many_workloads_is_one_line_under_its_gamma() -> None:
    entries = [
        _entry(
            f"w{i}",
            "off",
            0,
            [LOW_RATE.format(r), f"γ=2: mean tokens per round {1.2 + i / 10:.2f} < 1.5"],
        )
        for i, r in enumerate((0.31, 0.22, 0.35))
    ]
    grouped = grouped_warnings(_results(entries, 4))
    by_gamma = {g: (text, cells) for g, text, cells in grouped}
    assert set(by_gamma) == {8, 2}
    text, cells = by_gamma[8]
    assert text.count("accepted/proposed") == 1 and "…" in text and "< 0.4" in text
    assert cells == ["w0 T=0 (0.31)", "w1 T=0 (0.22)", "w2 T=0 (0.35)"]
    # neither γ=8 nor γ=2 is deployed (pool γ=4, every workload off): both left to the appendix
    shown = decision_warnings(_results(entries, 4))
    assert shown == ["2 further warning(s) concern settings not recommended: see the appendix."]
    # deployed γ=8: its warning is on the first screen, once
    shown = decision_warnings(_results(entries, 8))
    assert len(shown) == 2 and shown[0].startswith("⚠ γ=8: accepted/proposed is …")


def test_identical_warnings_keep_their_figures() -> None:
    w = "too few prompts: α CI half-width 0.100 > 0.05; about 40 prompts would reach it"
    grouped = grouped_warnings(_results([_entry("a", "on", 4, [w]), _entry("b", "on", 4, [w])], 4))
    assert grouped == [(None, w, ["a T=0", "b T=0"])]


def test_counts_line_counts_unmeasured_and_failed_cells() -> None:
    entries = [
        _entry("a", "on", 4, [], failed=2),
        _entry("b", "off", 0, []),
        _entry("c", "not_measured", 0, [], failed=5),
        _entry("d", "undecided", 0, []),
    ]
    line = counts_line(_results(entries, 4, failures=3))
    assert line.startswith(
        "4 workload × temperature cells: 1 ON, 1 OFF, 1 UNDECIDED, 1 not measured"
    )
    assert "7 failed unit(s)" in line and "3 unresolved" in line


def test_pool_decision_states_interval_and_bound() -> None:
    g = _pool(
        temperature=0.7,
        verdict="on",
        gamma=4,
        drafter="ngram",
        policy="fixed",
        speedup={"value": 1.4321, "ci95": [1.2, 1.7]},
        decision_lower_bound=1.1234,
    )
    text = pool_decision(g, 0.05)
    assert "T = 0.7: **ON at γ=4 (ngram)**" in text
    assert "1.43× [1.20×, 1.70×]" in text and "lower bound 1.12 > 1.05" in text
    off = pool_decision(
        _pool(temperature=0.0, verdict="off", gamma=0, reason="no setting clears"), 0.05
    )
    assert off == "T = 0: **OFF** for all traffic (no setting clears)"


def _rec(i: int, **kw: Any) -> dict[str, Any]:
    return {"status": "ok", "prompt_id": f"p{i}", "ttft_ms": [kw.get("ttft", 10.0 + i)],
            "tpot_ms": kw.get("tpot", float(i + 1)), "wall_ms": 100.0 * (i + 1)}  # fmt: skip


def test_tails_are_percentiles_only_where_the_sample_allows() -> None:
    tails = latency_tails([_rec(i) for i in range(10)])  # TPOT 1 … 10
    assert tails is not None and tails.n == 10
    assert tails.tpot_ms.p50 == pytest.approx(5.5)
    assert tails.tpot_ms.p90 == pytest.approx(9.1)  # linear interpolation
    assert tails.tpot_ms.p99 is None  # 10 requests cannot show a 1-in-100 tail
    assert tails.e2e_ms.p90 == pytest.approx(910.0)
    few = latency_tails([_rec(i) for i in range(9)])
    assert few is not None and few.tpot_ms.p90 is None and few.tpot_ms.p50 == 5.0
    hundred = latency_tails([_rec(i) for i in range(100)])
    assert hundred is not None and hundred.tpot_ms.p99 == pytest.approx(99.01)
    assert latency_tails([]) is None


def _econ_entry(
    verdict: str,
    gamma: int,
    itl: ItlPair | None = None,
    gammas: list[GammaRow] | None = None,
    base_mem: float | None = None,
    engine: EngineSection | None = None,
    best_measured: int | None = None,
) -> WorkloadResult:
    """Only the parts the economics read (model_construct: no other field)."""
    rec = Recommendation.model_construct(verdict=verdict, gamma=gamma, itl_ms=itl)
    if best_measured is not None:
        rec.best_measured = SettingSpeedup.model_construct(gamma=best_measured)
    return WorkloadResult.model_construct(
        workload="a", temperature=0.0, recommendation=rec, gammas=gammas or [],
        baseline_peak_memory_mb=base_mem, engine=engine,
    )  # fmt: skip


def test_economics_batch1_cost_ttft_and_memory() -> None:
    e = _econ_entry(
        "on", 2, ItlPair(baseline=10.0, speculative=4.0),
        [GammaRow.model_construct(gamma=2, peak_memory_mb=1500.0)], base_mem=1000.0,
    )  # fmt: skip
    grp: Any = {
        "baseline": [_rec(0, ttft=20.0), _rec(1, ttft=30.0)],
        "spec": {("model", "fixed", 2): [_rec(0, ttft=22.0), _rec(1, ttft=36.0)]},
    }
    out = economics_section(
        [e], {("a", 0.0): grp}, StoredEconomics(gpu_hour_usd=3.6, gpus=2), RunEnv(device="cuda:0")
    )
    row = out.by_workload[0]
    # $3.6/h × 2 GPUs = $0.002/s; 10 ms per token → 100 tokens/s → $20 per 10⁶ tokens
    assert row.loads[0].usd_per_million_off == pytest.approx(20.0)
    assert row.loads[0].usd_per_million_on == pytest.approx(8.0)
    assert row.ttft_change_ms == pytest.approx(4.0)  # (2 + 6) / 2
    assert row.draft_memory_mb == pytest.approx(500.0)
    unpriced = economics_section([e], {("a", 0.0): grp}, None, RunEnv(device="cuda"))
    assert unpriced.by_workload[0].loads[0].usd_per_million_off is None


def _conc_row(c: int, off: float, on: float) -> ConcurrencyRow:
    return ConcurrencyRow.model_construct(
        concurrency=c,
        baseline=ConcurrencyLatency.model_construct(output_tokens_per_s=off),
        gammas={"4": ConcurrencyCell.model_construct(output_tokens_per_s=on)},
    )


def test_economics_engine_cost_per_concurrency_from_batch_throughput() -> None:
    eng = EngineSection.model_construct(
        reference_concurrency=1,
        concurrency=[_conc_row(1, 100.0, 200.0), _conc_row(8, 800.0, 640.0)],
    )
    e = _econ_entry("on", 4, engine=eng)
    out = economics_section([e], {}, StoredEconomics(gpu_hour_usd=3.6), RunEnv(device="cuda"))
    loads = out.by_workload[0].loads
    assert [x.concurrency for x in loads] == [1, 8]
    assert loads[0].usd_per_million_off == pytest.approx(10.0)  # $0.001/s ÷ 100 tokens/s
    assert loads[0].usd_per_million_on == pytest.approx(5.0)
    assert loads[1].usd_per_million_off == pytest.approx(1.25)
    assert loads[1].usd_per_million_on == pytest.approx(1.5625)  # slower under load: dearer


def test_draft_memory_is_not_claimed_on_cpu() -> None:
    e = _econ_entry(
        "on", 2, ItlPair(baseline=10.0, speculative=4.0),
        [GammaRow.model_construct(gamma=2, peak_memory_mb=1500.0)], base_mem=1000.0,
    )  # fmt: skip
    row = economics_section([e], {}, None, RunEnv(device="cpu")).by_workload[0]
    assert row.draft_memory_mb is None


def _run(backend: str, env: dict[str, Any]) -> RunResults:
    return RunResults.model_construct(
        run=RunInfo.model_construct(backend=backend), env=RunEnv.model_validate(env)
    )


def test_engine_header_names_the_engine_version_and_flags() -> None:
    vllm = {
        "run": {"backend": "vllm"},
        "env": {
            "vllm": "0.32.0",
            "device": "cuda",
            "gpu": "NVIDIA H200",
            "engine_args": {
                "tensor_parallel_size": 2,
                "enforce_eager": True,
                "max_model_len": None,
            },
            "speculative_config": {"method": "eagle3", "num_speculative_tokens": [2, 4]},
        },
    }
    text = engine_header(_run(vllm["run"]["backend"], vllm["env"]))
    assert text is not None and text.startswith(
        "Engine: vLLM 0.32.0 (in-process), device cuda (NVIDIA H200)"
    )
    assert "tensor_parallel_size=2, enforce_eager=True" in text and "max_model_len" not in text
    # the speculative_config as the JSON --speculative-config takes (issue 34), not k=v pairs
    assert (
        'speculative_config (γ grid): {"method": "eagle3", "num_speculative_tokens": [2, 4]}'
        in text
    )
    openai = {
        "run": {"backend": "openai"},
        "env": {
            "servers": [{"url": "http://a:8000", "gamma": 4, "label": "eagle γ=4"}],
            "server_info": {"http://a:8000": {"server_version": "0.9.1", "model": "m"}},
            "chat": False,
            "prompt_format": "tokens",
        },
    }
    text = engine_header(_run(openai["run"]["backend"], openai["env"]))
    assert text == (
        "Engine: OpenAI-compatible server(s) http://a:8000 γ=4 (eagle γ=4, version 0.9.1, model m)"
        "; chat False, prompt_format tokens."
    )
    assert engine_header(_run("transformers", {})) is None


def test_economics_of_an_off_workload_prices_its_best_measured_gamma() -> None:
    e = _econ_entry(
        "off", 0, ItlPair(baseline=10.0, speculative=10.0),
        [GammaRow.model_construct(gamma=4, itl_ms=EstimateJSON.model_construct(value=12.5))],
        best_measured=4,
    )  # fmt: skip
    out = economics_section([e], {}, StoredEconomics(gpu_hour_usd=3.6), RunEnv(device="cuda"))
    row = out.by_workload[0]
    assert row.gamma == 4
    assert row.loads[0].usd_per_million_off == pytest.approx(10.0)
    assert row.loads[0].usd_per_million_on == pytest.approx(12.5)  # on would cost more
