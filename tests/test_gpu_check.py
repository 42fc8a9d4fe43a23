"""The GPU check (scripts/gpu_check.sh) and the CUDA path it exercises.

- the step runner's failure and timeout handling (the pure parts — the verify fit's labels, the
  predicted speedup, junit counting — are in tests/unit/test_gpu_check_math.py);
- slow: the whole script end to end with `--device cpu --quick`, as CI runs it;
- gpu (skipped without CUDA; `bash scripts/gpu_check.sh` runs them on a CUDA machine): the wall
  clock against CUDA events, the tiny pair's greedy identity in bf16, CUDA peak memory,
  `device_map: auto`, accept's GPU batch default.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


physics = _load(REPO / "benchmarks" / "gpu_physics.py", "gpu_physics")
driver = _load(REPO / "scripts" / "gpu_check.py", "gpu_check")


# --------------------------------------------------------------------------------------------
# pure


def _ctx(tmp_path: Path, budget_s: float = 60) -> object:
    (tmp_path / "logs").mkdir(exist_ok=True)
    return driver.Context(tmp_path, tmp_path, "cpu", True, budget_s, sys.executable, tmp_path)


def test_a_failing_step_is_recorded_and_a_hung_one_is_killed(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    failed = driver.run_step(
        driver.Step("boom", [sys.executable, "-c", "import sys; sys.exit(3)"], 30), ctx
    )
    assert (failed.status, failed.rc) == ("fail", 3)
    t0 = time.monotonic()
    # the child spawns a grandchild that would outlive a plain kill: the process group goes
    hang = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    hung = driver.run_step(driver.Step("hang", [sys.executable, "-c", hang], 1.5), ctx)
    assert hung.status == "timeout" and time.monotonic() - t0 < 20
    assert "--> timeout" in (tmp_path / "logs" / "hang.log").read_text()
    spent = driver.run_step(driver.Step("late", ["true"], 30), _ctx(tmp_path, budget_s=4))
    assert spent.status == "fail" and "budget" in spent.note


def test_bad_device_is_one_error_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--out", str(tmp_path), "--device", "tpu"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHON": sys.executable},
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: --device must be cuda, cuda:N or cpu, got 'tpu'"
    ]


# --------------------------------------------------------------------------------------------
# end to end, as CI runs it


@pytest.mark.slow
@pytest.mark.long  # a minute or more: make test-long (CI runs it)
def test_gpu_check_quick_on_cpu_end_to_end(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    cmd = ["bash", "scripts/gpu_check.sh", "--device", "cpu", "--quick", "--out"]
    proc = subprocess.run(
        [*cmd, str(out), "--work", str(work)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHON": sys.executable},
        timeout=400,
    )
    log = (out / "log.txt").read_text() if (out / "log.txt").exists() else ""
    assert proc.returncode == 0, proc.stdout + proc.stderr + log[-4000:]
    # what the device tool brings back: at most 8 files, no folders
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "summary.md",
            "results.json",
            "env.json",
            "log.txt",
            "verify.json",
            "run-results.json",
            "run-report.md",
            "accept.json",
        ]
    )
    res = json.loads((out / "results.json").read_text())
    status = {s["name"]: s["status"] for s in res["steps"]}
    assert status == {
        "install": "skip",
        "gpu-tests": "pass",
        "run": "pass",
        "physics": "pass",
        "accept": "pass",
        "verify-bfloat16": "skip",
        "verify-float32": "pass",
        "cpu-checks": "pass",
        "unit-tests": "skip",
    }
    # the CUDA path's CPU checks ran, all of them, in this form too
    cpu = res["tests"]["cpu-checks"]
    assert cpu["failures"] == cpu["errors"] == 0 and cpu["passed"] == cpu["tests"] >= 20
    # the gpu tests were collected and skipped (no CUDA here), none failed
    gpu_tests = res["tests"]["gpu-tests"]
    assert gpu_tests["skipped"] == gpu_tests["tests"] >= 5 and gpu_tests["failures"] == 0
    v = res["verify"]["float32"]
    assert v["passed"] and v["greedy_identical_runs"] == v["greedy_runs"] >= 1
    assert v["near_tie_flips"] == 0  # fp32: any flip would fail
    ph = res["physics"]
    for m in ph["models"].values():
        assert m["params"] == m["params_by_hand"]  # the config built is the shape we meant
    assert sorted(int(k) for k in ph["batch1"]["verify_ms"]) == list(range(1, 17))
    assert [r["batch"] for r in ph["batch"]] == [1, 2, 4]
    assert ph["timer_check"] == {"ran": False, "reason": "no CUDA events on a CPU: skipped"}
    # the predictions use the tiny run's α (one entry per workload × temperature it measured)
    run = json.loads((out / "run-results.json").read_text())
    run_alpha = {(w["workload"], w["temperature"]): w["alpha"]["value"] for w in run["workloads"]}
    pred_alpha = {
        (p["workload"], p["temperature"]): p["alpha"] for p in ph["predictions"]["workloads"]
    }
    assert pred_alpha == pytest.approx(run_alpha) and len(pred_alpha) == 1
    summary = (out / "summary.md").read_text()
    assert "| timer agreement (wall vs CUDA events) | skipped |" in summary
    assert "| verify float32 | LOSSLESS |" in summary
    assert "| step physics | PASS" in summary and "| step cpu-checks | PASS" in summary
    if shutil.which("nvidia-smi") is None:  # CI: nothing recorded, and the summary says so
        assert "| GPU state (nvidia-smi) | not recorded |" in summary

    # The CUDA-only rows of the summary, rendered from this result with the fields a GPU adds.
    ph["timer_check"] = {
        "ran": True,
        "rows": [{"step": "target", "wall_ms": 7.5, "event_ms": 7.0, "rel_diff": 0.5 / 7}],
        "max_abs_rel_diff": 0.5 / 7,
        "tolerance": physics.TIMER_TOLERANCE,
        "passed": False,
    }
    ph["batch1"]["t_target_ms"], ph["weight_read_floor_ms"], ph["copy_bandwidth_gbs"] = (
        6.5,
        1.3,
        4300,
    )
    ph["batch"][0]["peak_memory_mb"] = 6144.0
    driver.write_summary(res, tmp_path / "cuda.md")
    cuda = (tmp_path / "cuda.md").read_text()
    assert "| timer agreement (wall vs CUDA events) | FAIL: max 7.14 % |" in cuda
    assert "T_ar / floor = 5.0" in cuda and "peak 6.0 GiB" in cuda


# --------------------------------------------------------------------------------------------
# CUDA only


@pytest.mark.gpu
@needs_cuda
def test_clock_agrees_with_cuda_events() -> None:
    device = torch.device("cuda")
    timer = physics.DualTimer(device)
    a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)

    def work() -> None:
        for _ in range(20):
            a @ a

    work()
    walls, events = zip(*(timer(work) for _ in range(10)), strict=True)
    ratio = float(np.median(walls)) / float(np.median(events))
    assert abs(ratio - 1) < physics.TIMER_TOLERANCE, (walls, events)


@pytest.mark.gpu
@needs_cuda
def test_tiny_pair_bf16_greedy_speculation_matches_target_on_cuda() -> None:
    from specbench.config import deep_merge, parse_config, read_yaml
    from specbench.harness.verify.verify import VerifyOptions, run_verify

    path = REPO / "configs" / "tiny.yaml"
    over = {side: {"device": "cuda", "dtype": "bfloat16"} for side in ("target", "draft")}
    cfg = parse_config(deep_merge(read_yaml(path), over), str(path))
    rep = run_verify(cfg, VerifyOptions(temperatures=[0.0], gamma=4, max_prompts=1), path.parent)
    assert rep.greedy is not None and rep.greedy.passed  # flips only within the bf16 tolerance
    assert rep.greedy.dtype == "bfloat16"


@pytest.mark.gpu
@needs_cuda
def test_cuda_peak_memory_counts_an_allocation() -> None:
    from specbench.harness.transformers.runner import _peak_memory_mb

    device = torch.device("cuda")
    torch.cuda.reset_peak_memory_stats(device)
    block = torch.empty(256 * 2**20, dtype=torch.uint8, device=device)
    assert _peak_memory_mb(device) >= 256
    del block


@pytest.mark.gpu
@needs_cuda
def test_device_map_auto_loads_the_tiny_pair_on_cuda() -> None:
    pytest.importorskip("accelerate")
    from specbench.config import ModelSpec
    from specbench.models import load_model

    mapped = load_model(ModelSpec(model="tiny-target", dtype="float32", device_map="auto"))
    plain = load_model(ModelSpec(model="tiny-target", dtype="float32", device="cuda"))
    assert mapped.device.type == "cuda"
    ids = torch.arange(1, 33, device="cuda")[None]
    with torch.inference_mode():
        torch.testing.assert_close(mapped.model(ids).logits, plain.model(ids).logits)


@pytest.mark.gpu
@needs_cuda
def test_accept_batches_16384_tokens_on_cuda() -> None:
    from specbench.decoding.teacher_forced import default_batch_tokens

    assert default_batch_tokens(torch.device("cuda")) == 16384
    assert default_batch_tokens(torch.device("cpu")) == 1024


@pytest.mark.gpu
@needs_cuda
def test_syncs_per_round_on_cuda_stay_within_the_design(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/harness/test_host_syncs.py counts the syncs Python makes; CUDA's sync-debug mode also
    sees those inside ops (a kernel that reads a value back). Per round they must stay within the
    design's device reads + token copies + timer syncs (docs/performance.md): more means a hidden
    synchronisation in the loop."""
    import warnings

    from specbench.config import ModelSpec
    from specbench.decoding import generate
    from specbench.decoding.drafters import ModelDrafter
    from specbench.decoding.lm import CachedLM
    from specbench.decoding.timing import Clock
    from specbench.models import check_pair_compatible, load_model
    from specbench.sampling_params import SamplingParams

    t = load_model(ModelSpec(model="tiny-target", dtype="bfloat16", device="cuda"))
    d = load_model(ModelSpec(model="tiny-draft", dtype="bfloat16", device="cuda"))
    v = check_pair_compatible(t, d).real_vocab_size
    device = torch.device("cuda")
    clock, params = Clock(device), SamplingParams(temperature=1.0)
    gen = torch.Generator(device=device).manual_seed(0)
    target, drafter = CachedLM(t.model, v), ModelDrafter(CachedLM(d.model, v), params, clock, gen)
    real = generate.speculative_round
    per_round: list[tuple[int, int]] = []

    def counted(*args: object, **kwargs: object) -> object:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                step = real(*args, **kwargs)  # type: ignore[arg-type]
            finally:
                torch.cuda.set_sync_debug_mode("default")
        syncs = sum("synchroniz" in str(w.message) for w in caught)
        per_round.append((len(step.proposal.step_ms), syncs))
        return step

    monkeypatch.setattr(generate, "speculative_round", counted)
    ids = t.tokenizer("def f(x):\n    return x + 1\n")["input_ids"]
    with torch.inference_mode():
        generate.speculative_generate(
            target, drafter, ids, generate.fixed_gamma(4), params, 24, clock, generator=gen
        )
    assert per_round
    for steps, syncs in per_round:
        assert syncs <= (2 * steps + 3) + (steps + 2) + (2 * steps + 2), per_round
