"""`backend: vllm` (in-process `vllm.LLM`) on the tiny pair, on CPU, and its bad input.

vLLM starts its engine core in a spawned process, so runs go through `python -m specbench` in a
subprocess (the CLI as users run it). Tests needing vLLM are marked `vllm` and skipped when it is
not importable (`make test-vllm` installs it and runs them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli.app import app
from specbench.records import read_records
from tests.logged_requests import write_logged_requests

from .test_openai_backend import tiny_pair_dirs

runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


@pytest.fixture
def vllm_installed() -> None:
    pytest.importorskip("vllm")


def write_config(tmp_path: Path, name: str = "c.yaml", **over: Any) -> Path:
    target, draft = tiny_pair_dirs()
    cfg: dict[str, Any] = {
        "name": "tiny-vllm-test",
        "backend": "vllm",
        "target": {"model": target, "dtype": "float32"},
        "draft": {"model": draft, "dtype": "float32"},
        "engine": {"max_model_len": 512, "gpu_memory_utilization": 0.3, "enforce_eager": True},
        "speculative": {"method": "draft_model", "num_speculative_tokens": [3]},
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 4}],
        "sampling": {"temperatures": [0.0]},
        "concurrency": [1, 4],
        "max_new_tokens": 16,
        "warmup": 0,
        "output_dir": str(tmp_path / "out"),
        "decision": {"bootstrap": 300},
    }
    cfg.update(over)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return path


def specbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`specbench ARGS` in a fresh interpreter, in a process group of its own: on a timeout the
    whole group is killed — vLLM's engine core and worker processes too, which would otherwise
    outlive it holding their memory (7 GiB each here) and starve the lane's next engine."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "specbench", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"COLUMNS": "160", "NO_COLOR": "1", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_missing_vllm_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` now raises ImportError
    res = runner.invoke(app, ["run", str(write_config(tmp_path))])
    assert res.exit_code == 2
    assert "backend 'vllm' needs vLLM, which is not installed" in res.output
    assert "pip install -e '.[vllm]'" in res.output and "Traceback" not in res.output


@pytest.mark.vllm
@pytest.mark.slow
def test_inprocess_run_matches_the_transformers_reference(
    tmp_path: Path, vllm_installed: None
) -> None:
    # the transformers reference on the same prompts and sampling
    ref = write_config(
        tmp_path, "ref.yaml", backend="transformers", gammas=[3], output_dir=str(tmp_path / "ref")
    )
    ref_cfg = yaml.safe_load(ref.read_text())
    for key in ("engine", "speculative", "concurrency"):
        ref_cfg.pop(key)
    ref.write_text(yaml.safe_dump(ref_cfg))
    assert runner.invoke(app, ["run", str(ref)]).exit_code == 0

    cfg = write_config(tmp_path, conformance={"reference_run": str(tmp_path / "ref")})
    res = specbench("run", str(cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    out = tmp_path / "out"
    recs = read_records(out / "records.jsonl")
    reqs = [r for r in recs if r["kind"] in ("baseline", "spec")]
    assert len(reqs) == 2 * 2 * 4  # settings × concurrency levels × prompts
    assert all(r["backend"] == "vllm" and r["new_tokens"] <= 16 and r["tpot_ms"] > 0 for r in reqs)

    # counters: per request at concurrency 1 add up to the batch diff; γ draft tokens per round
    batch = next(
        r
        for r in recs
        if r["kind"] == "engine_metrics" and r["gamma"] == 3 and r["concurrency"] == 1
    )["spec_counters"]
    per_req = [r["spec_counters"] for r in reqs if r["gamma"] == 3 and r["concurrency"] == 1]
    for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        assert sum(c[key] for c in per_req) == batch[key]
    assert batch["num_draft_tokens"] == 3 * batch["num_drafts"] > 0
    assert len(batch["num_accepted_tokens_per_pos"]) == 3

    # greedy speculative decoding is lossless: the same tokens as the engine's own baseline
    base = {(r["prompt_id"], r["concurrency"]): r["output_ids"] for r in reqs if r["gamma"] == 0}
    spec = {(r["prompt_id"], r["concurrency"]): r["output_ids"] for r in reqs if r["gamma"] == 3}
    same = sum(base[k] == spec[k] for k in base)
    assert same >= len(base) - 1, (same, len(base))  # a near-tie may flip in a batched verify

    results = json.loads((out / "results.json").read_text())
    e = results["workloads"][0]
    assert e["engine"]["acceptance_source"] == "per_request_counters"
    assert [r["concurrency"] for r in e["engine"]["concurrency"]] == [1, 4]
    tau = e["engine"]["per_gamma"]["3"]["mean_accepted_length"]["value"]
    assert 1.0 <= tau <= 4.0
    conf = results["conformance"]
    assert conf["status"] == "ok", conf
    row = conf["comparisons"][0]
    assert row["gamma"] == 3 and row["n_prompts"] == 4
    assert row["greedy_outputs"]["identical"] >= 3
    # the draft's memory: each engine's KV capacity as it reports it, the pair's footprints as
    # computed from their files (float32: the dtype the engines were given)
    mem = json.loads((out / "env.json").read_text())["memory"]
    assert mem["source"] == "engine", mem
    assert [c["gamma"] for c in mem["kv_capacity"]] == [0, 3]
    assert all(c["tokens"] == c["num_gpu_blocks"] * c["block_size"] > 0 for c in mem["kv_capacity"])
    _, draft = tiny_pair_dirs()
    assert mem["drafts"][draft]["kv_bytes_per_token"] == 2 * 1 * 3 * 32 * 4
    kv = results["economics"]["kv_capacity"]
    assert kv["baseline_tokens"] == mem["kv_capacity"][0]["tokens"]
    assert kv["by_gamma"]["3"]["taken_tokens"] is not None
    md = (out / "report.md").read_text()
    assert "## Engine conformance" in md and "**OK**" in md
    assert "KV-cache capacity as the engines report it" in md
    # the speedup-against-concurrency plot: drawn for a cell with a verdict only (a cell not
    # measured, e.g. too few non-degenerate answers of 4, shows no speedup: report/sections/no_verdict.py)
    plot = out / "plots" / "concurrency_tiny_code_T0.png"
    drawn = plot.is_file() and plot.stat().st_size > 0
    assert drawn == (e["recommendation"]["verdict"] != "not_measured"), e["recommendation"]
    assert (out / "engine.log").stat().st_size > 0  # vLLM's own log, kept out of the console


@pytest.mark.vllm
def test_unknown_options_are_named(tmp_path: Path, vllm_installed: None) -> None:
    res = specbench("run", str(write_config(tmp_path, engine={"extra": {"max_num_seq": 8}})))
    assert res.returncode == 2
    line = res.stderr.strip().splitlines()[-1]
    assert "engine.extra.max_num_seq" in line and "did you mean 'max_num_seqs'" in line
    assert "Traceback" not in res.stderr
    spec = {"method": "eagel", "num_speculative_tokens": [2]}
    res = specbench("run", str(write_config(tmp_path, speculative=spec)), "--force")
    assert res.returncode == 2 and "did you mean 'eagle'" in res.stderr


@pytest.mark.vllm
@pytest.mark.slow
def test_engine_that_fails_to_start_keeps_the_records(tmp_path: Path, vllm_installed: None) -> None:
    # the baseline engine runs; the speculative one is refused (no KV cache fits in ~0 memory)
    cfg = write_config(
        tmp_path,
        concurrency=[1],
        max_new_tokens=8,
        speculative={
            "method": "draft_model",
            "num_speculative_tokens": [2],
            "options": {"draft_tensor_parallel_size": 4},
        },
    )
    res = specbench("run", str(cfg))
    assert res.returncode == 2, res.stderr[-2000:]
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("error: vLLM failed to start the γ=2 draft_model engine")
    assert "full log:" in line and "Traceback" not in res.stderr
    recs = read_records(tmp_path / "out" / "records.jsonl")
    assert len([r for r in recs if r["kind"] == "baseline"]) == 4


@pytest.mark.vllm
@pytest.mark.slow
def test_inprocess_logged_sampling_runs_each_request_as_logged(
    tmp_path: Path, vllm_installed: None
) -> None:
    """`dataset.sampling: logged` on vLLM in-process: each request gets its own SamplingParams
    (temperature, top_p, max tokens from its row; the config's where the row has none), so the
    engine stops every request at its own max tokens, and the greedy row decodes the same tokens
    with and without speculation."""
    expected_max = {"a": 4, "b": 7, "c": 12, "d": 12}  # max_new_tokens 12 caps and fills in
    dataset = write_logged_requests(tmp_path / "logs.jsonl")
    cfg = write_config(
        tmp_path,
        workloads=[{"name": "logs", "dataset": dataset}],
        sampling={"temperatures": [0.7], "top_p": 0.95},
        concurrency=[1, 2],
        max_new_tokens=12,
        keep_text=True,  # records by the logged ids (private data has hashed ids otherwise)
    )
    res = specbench("run", str(cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    reqs = [
        r
        for r in read_records(tmp_path / "out" / "records.jsonl")
        if r["kind"] in ("baseline", "spec")
    ]
    assert len(reqs) == 2 * 2 * 4  # (no speculation, γ = 3) × concurrency levels × prompts
    for r in reqs:
        assert (
            r["sampling"] == "logged" and r["request"]["max_tokens"] == expected_max[r["prompt_id"]]
        )
        assert 0 < r["new_tokens"] <= expected_max[r["prompt_id"]]
    # the engine honoured each request's own limit (the tiny pair rarely stops early)
    at_limit = sum(r["new_tokens"] == expected_max[r["prompt_id"]] for r in reqs)
    assert at_limit >= len(reqs) - 2, [(r["prompt_id"], r["new_tokens"]) for r in reqs]
    greedy = {
        (r["gamma"], r["concurrency"]): r["output_ids"] for r in reqs if r["prompt_id"] == "a"
    }
    # temperature 0 for row a: alone in its batch, speculation is lossless (the same tokens)
    assert greedy[(0, 1)] == greedy[(3, 1)]
    assert greedy[(0, 1)] == greedy[(0, 2)]  # batching does not change the greedy baseline
    mix = json.loads((tmp_path / "out" / "results.json").read_text())["workloads"][0][
        "request_sampling"
    ]
    assert mix["prompts"] == 4 and mix["max_tokens_capped"] == 1
