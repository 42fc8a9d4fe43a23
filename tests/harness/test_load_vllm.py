"""`backend: vllm` (in-process, tiny pair, CPU) under open-loop arrivals: the engine's step loop
admits each request at its Poisson arrival, every cell gets tails and SLO goodput, no in-process
stream is flagged buffered, and the open-loop greedy baseline decodes what the closed loop did.
Marked `vllm` (make test-vllm); run by hand under `flock /tmp/vllm.lock`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from specbench.records import read_records

from .test_vllm_backend import specbench, write_config


@pytest.fixture
def vllm_installed() -> None:
    pytest.importorskip("vllm")


@pytest.mark.vllm
@pytest.mark.slow
def test_inprocess_open_loop_rates(tmp_path: Path, vllm_installed: None) -> None:
    cfg = write_config(
        tmp_path,
        concurrency=[1],
        load={"rates": [4.0, 16.0], "max_in_flight": 4},
        slo={"ttft_ms": 60000, "e2e_ms": 120000},
    )
    res = specbench("run", str(cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    recs = read_records(tmp_path / "out" / "records.jsonl")
    reqs = [r for r in recs if r["kind"] in ("baseline", "spec")]
    cells = Counter((r["gamma"], r.get("load", "closed")) for r in reqs)
    assert cells == {(g, ld): 4 for g in (0, 3) for ld in ("closed", "rate=4", "rate=16")}
    assert not any(r["buffered"] for r in reqs)  # one chunk per engine step: never buffered
    assert all(r["queue_ms"] >= 0 for r in reqs if r.get("load"))
    ids = {(r["gamma"], r.get("load", "closed"), r["prompt_id"]): r["output_ids"] for r in reqs}
    for (g, ld, p), out in ids.items():
        if g == 0 and ld != "closed":  # greedy baseline: the same tokens whatever the arrivals
            assert out == ids[(0, "closed", p)]
    metrics = [r for r in recs if r["kind"] == "engine_metrics" and r.get("load")]
    assert len(metrics) == 4 and not any(m["hit_bound"] for m in metrics)
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    load = results["workloads"][0]["engine"]["load"]
    assert {(c["gamma"], c["load"]) for c in load} == set(cells)
    for c in load:
        assert c["n"] == 4 and c["ttft_ms"]["p50"]["value"] is not None
        assert c["goodput"]["good"] == 4  # generous SLO: every request meets it


@pytest.mark.vllm
@pytest.mark.slow
def test_inprocess_steady_state_by_request_count(tmp_path: Path, vllm_installed: None) -> None:
    """`load.requests: 10` (docs/serving.md "Steady state") on the in-process engine: the rate
    sends 10 drawn prompts (more than the workload's 4), `steady c=2` keeps 2 clients busy for
    10 requests; every request has its phase, each cell its steady-state block."""
    cfg = write_config(
        tmp_path,
        concurrency=[2],
        load={"rates": [8.0], "requests": 10, "max_in_flight": 4},
    )
    res = specbench("run", str(cfg), timeout=1200)  # 3 min idle; a loaded CI machine is slower
    assert res.returncode == 0, res.stderr[-3000:]
    recs = read_records(tmp_path / "out" / "records.jsonl")
    reqs = [r for r in recs if r["kind"] in ("baseline", "spec") and r.get("load")]
    cells = Counter((r["gamma"], r["load"]) for r in reqs)
    assert cells == {(g, ld): 10 for g in (0, 3) for ld in ("rate=8", "steady c=2")}
    assert all(r["phase"] in ("warmup", "steady", "drain") for r in reqs)
    # the first 10 % of 10 requests (one) per setting
    assert sum(r["phase"] == "warmup" for r in reqs if r["load"] == "steady c=2") == 2
    metrics = [r for r in recs if r["kind"] == "engine_metrics" and r.get("load")]
    assert len(metrics) == 4 and not any(m["hit_bound"] for m in metrics)
    assert all(m["steady_window_s"] for m in metrics)
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    for c in results["workloads"][0]["engine"]["load"]:
        if c["load"] != "closed":
            st = c["steady"]  # kept_up is the CPU engine's own business here: only its shape
            assert st["achieved_rate"] is not None and st["warmup_excluded"]["n"] >= 1
            assert "kept_up" in st and c["n"] + st["warmup_excluded"]["n"] == 10
