"""The GPU check: one bounded run of specbench's CUDA path, every figure into one folder.

    bash scripts/gpu_check.sh --out OUT                        # a CUDA machine: ≤ 8 minutes
    bash scripts/gpu_check.sh --out OUT --device cpu --quick   # any machine (CI): small shapes

Steps, each in its own process under its own timeout (a hung CUDA call cannot stall the rest),
all inside one time budget; a failing step is recorded and the next one runs:

  install      the carried wheels (scripts/gpu_wheels.txt, offline, into a private --target
               folder) and specbench itself (`pip install --no-deps -e .`; falls back to running
               from the working tree); --quick skips it when specbench already imports
  gpu-tests    the tests marked `gpu` (skipped without CUDA)
  run          `specbench run configs/tiny.yaml --device D`
  physics      benchmarks/gpu_physics.py: the sized pair's timings, the verify fit, the timer
               cross-check (CUDA events against specbench's synchronised wall timers) and the
               predictions from the run's α
  accept       `specbench accept … --device D --measure-timing`
  verify-*     `specbench verify` on the tiny pair in bfloat16 and float32 (--quick: float32)
  cpu-checks   the CUDA path's checks that run on a CPU (`CPU_CHECKS`: production dtypes, host
               syncs per round, device placement, meta-device memory plans, env.json's GPU
               fields), the same tests in both forms, so the GPU and CPU checks cannot drift apart
  unit-tests   the non-slow test suite in the time left (--quick: skipped; CI runs it)

OUT receives at most 8 files (what the device tool brings back): summary.md (one table of every
figure), results.json, env.json, log.txt, verify.json, run-results.json, run-report.md,
accept.json. Everything else (the run directory, plots, junit files) stays in --work.
Exit code: 0 when every step passed, 1 otherwise, 2 for bad options.

This driver uses the standard library only, so it reports even when the install step fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FULL_BUDGET_S = 480  # the bound: 8 minutes on one GPU
QUICK_BUDGET_S = 300
RESERVE_S = 5  # kept back for writing the summary


@dataclass
class StepResult:
    name: str
    status: str  # "pass" | "fail" | "timeout" | "skip"
    wall_s: float = 0.0
    rc: int | None = None
    note: str = ""


@dataclass
class Step:
    name: str
    argv: list[str]
    timeout_s: float
    stdout_to: Path | None = None  # the command's stdout goes to this file (JSON documents)
    skip: str | None = None  # a reason not to run it (a skip is not a failure)
    ok_codes: tuple[int, ...] = (0,)
    after: Callable[[StepResult], None] | None = None


@dataclass
class Context:
    out: Path
    work: Path
    device: str
    quick: bool
    budget_s: float
    python: str
    wheels: Path
    started: float = field(default_factory=time.monotonic)
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def remaining(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)


def run_command(
    argv: list[str], timeout_s: float, ctx: Context, log: Any, stdout_to: Path | None = None
) -> tuple[int | None, float]:
    """Run argv in its own process group (so a timeout also ends its children, e.g. pytest
    workers); stderr, and stdout unless redirected, go to the log. Returns (rc or None, wall s)."""
    log.write(f"\n$ {' '.join(argv)}\n")
    log.flush()
    t0 = time.monotonic()
    with open(stdout_to, "w") if stdout_to else open(os.devnull, "w") as sink:
        proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=ctx.env,
            stdout=sink if stdout_to else log,
            stderr=log,
            start_new_session=True,
        )
        try:
            rc: int | None = proc.wait(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    return rc, time.monotonic() - t0


def run_step(step: Step, ctx: Context) -> StepResult:
    with open(ctx.work / "logs" / f"{step.name}.log", "w") as log:
        result = _run_step(step, ctx, log)
        log.write(f"--> {result.status} ({result.wall_s:.1f} s) {result.note}\n")
    return result


def _run_step(step: Step, ctx: Context, log: Any) -> StepResult:
    if step.skip:
        return StepResult(step.name, "skip", note=step.skip)
    left = ctx.remaining() - RESERVE_S
    if left < 5:
        return StepResult(
            step.name, "fail", note=f"not run: the time budget ({ctx.budget_s:.0f} s) was spent"
        )
    limit = min(step.timeout_s, left)
    rc, wall = run_command(step.argv, limit, ctx, log, step.stdout_to)
    if rc is None:
        return StepResult(step.name, "timeout", wall, None, f"killed after {limit:.0f} s")
    if rc in step.ok_codes:
        return StepResult(step.name, "pass", wall, rc)
    return StepResult(step.name, "fail", wall, rc, f"exit code {rc}")


# --------------------------------------------------------------------------------------------
# install


def _imports(ctx: Context, modules: str) -> bool:
    probe = [ctx.python, "-c", f"import {modules}"]
    return subprocess.run(probe, cwd=REPO, env=ctx.env, capture_output=True).returncode == 0


def install(ctx: Context, timeout_s: float) -> StepResult:
    """Carried wheels into a private --target folder (no network, nothing of the image replaced),
    then specbench from the working tree (which is first on PYTHONPATH either way: the check is
    about this tree, not about a copy installed earlier)."""
    with open(ctx.work / "logs" / "install.log", "w") as log:
        result = _install(ctx, timeout_s, log)
        log.write(f"--> {result.status} ({result.wall_s:.1f} s) {result.note}\n")
    return result


def _install(ctx: Context, timeout_s: float, log: Any) -> StepResult:
    t0 = time.monotonic()
    if ctx.quick and _imports(ctx, "specbench.config"):
        return StepResult("install", "skip", note="specbench already importable (--quick)")
    notes = []
    if ctx.wheels.is_dir():
        site = ctx.work / "site"
        argv = [ctx.python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
        argv += ["--upgrade", "--find-links", str(ctx.wheels), "--target", str(site)]
        rc, _ = run_command([*argv, "-r", "scripts/gpu_wheels.txt"], timeout_s, ctx, log)
        if rc != 0:
            return StepResult("install", "fail", time.monotonic() - t0, rc, "wheel install failed")
        _prepend_path(ctx, site)
        _prepend_path(ctx, REPO)
        notes.append(f"wheels from {ctx.wheels.name}/ into a --target folder")
    else:
        notes.append(f"no {ctx.wheels.name}/ carried: the image's packages only")
    argv = [
        ctx.python,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
    ]
    left = max(timeout_s - (time.monotonic() - t0), 5.0)
    rc, _ = run_command([*argv, "-e", "."], left, ctx, log)
    # An image whose pip refuses (externally managed) or lacks setuptools still runs the tree.
    notes.append(
        "pip install --no-deps -e . " + ("done" if rc == 0 else "failed: running from the tree")
    )
    wall = time.monotonic() - t0
    if not _imports(ctx, "specbench.config, specbench.cli.app"):
        return StepResult(
            "install", "fail", wall, None, "; ".join([*notes, "specbench does not import"])
        )
    return StepResult("install", "pass", wall, 0, "; ".join(notes))


def _prepend_path(ctx: Context, folder: Path) -> None:
    parts = [p for p in ctx.env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(folder)]
    ctx.env["PYTHONPATH"] = os.pathsep.join([str(folder), *parts])


# --------------------------------------------------------------------------------------------
# the steps


def derived_config(ctx: Context, dtype: str) -> Path:
    """configs/tiny.yaml at `dtype` (verify has no --dtype flag); --quick also shortens answers."""
    import yaml  # in the image (pyyaml) and in specbench's dependencies

    cfg = yaml.safe_load((REPO / "configs" / "tiny.yaml").read_text())
    for side in ("target", "draft"):
        cfg[side]["dtype"] = dtype
    if ctx.quick:
        cfg["max_new_tokens"] = 16
    path = ctx.work / f"tiny-{dtype}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# Seconds per step: on one GPU the sum stays inside the 8-minute budget with the unit tests
# taking what is left; --quick runs on busy CI CPUs, where only the overall budget matters.
TIMEOUTS = {
    "gpu-tests": 60,
    "run": 75,
    "physics": 90,
    "accept": 45,
    "verify-bfloat16": 60,
    "verify-float32": 60,
    "cpu-checks": 120,
    "unit-tests": 150,
}
# docs/performance.md "Measured on a GPU": what is checked on a CPU (also by `make test`)
CPU_CHECKS = [
    "tests/harness/test_low_precision.py",
    "tests/harness/test_host_syncs.py",
    "tests/harness/test_device_placement.py",
    "tests/harness/test_gpu_env.py",
    "tests/models/test_memory_plan.py",
    "tests/models/test_device_map.py",
]
QUICK_TIMEOUT_S = 150


def plan_steps(ctx: Context) -> list[Step]:
    py, d, w, q = ctx.python, ctx.device, ctx.work, ctx.quick
    sb = [py, "-m", "specbench"]
    pytest = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    fp32, bf16 = derived_config(ctx, "float32"), derived_config(ctx, "bfloat16")
    run_cfg = str(fp32 if q else REPO / "configs" / "tiny.yaml")
    if q:
        run_args = ["--max-prompts", "2", "--gammas", "1,2", "--temperature", "0"]
        run_args += ["--workloads", "tiny_code"]
        accept_args = ["--buckets", "tiny_code", "--max-requests", "2", "--temperature", "0"]
        accept_args += ["--no-logged-params", "--timing-reps", "3"]
        verify_args = ["--max-prompts", "1", "--contexts", "1", "--samples", "100", "--gamma", "2"]
    else:
        # accept at dtype auto: bf16 on CUDA, the GPU default a user gets
        run_args, accept_args = ["--max-prompts", "3"], ["--dtype", "auto"]
        verify_args = ["--max-prompts", "2", "--contexts", "3", "--samples", "600"]
    physics_args = ["--device", d, "--out", str(w / "physics.json")]
    physics_args += ["--alpha-from", str(w / "run" / "results.json")] + (["--quick"] if q else [])
    accept = [*sb, "accept", "--config", run_cfg, "--data", "datasets/logged/tiny_traffic.jsonl"]
    accept += ["--bucket-by", "workload", "--device", d, "--measure-timing", "--json"]
    gpu_tests = [*pytest, "-m", "gpu", "tests/test_gpu_check.py"]
    cpu_checks = [*pytest, *CPU_CHECKS, "--junitxml", str(w / "cpu-checks.xml")]
    unit = [*pytest, "-m", "not slow and not gpu", *([] if q else _optional_ignores(ctx))]
    steps = [
        Step("gpu-tests", [*gpu_tests, "--junitxml", str(w / "gpu-tests.xml")], 0),
        Step(
            "run",
            [*sb, "run", run_cfg, "--device", d, "--out", str(w / "run"), "--force", *run_args],
            0,
        ),
        Step("physics", [py, "benchmarks/gpu_physics.py", *physics_args], 0),
        Step("accept", [*accept, *accept_args], 0, stdout_to=w / "accept.json"),
        Step(
            "verify-bfloat16",
            [*sb, "verify", str(bf16), "--device", d, "--json", *verify_args],
            0,
            stdout_to=w / "verify-bfloat16.json",
            skip="--quick on a CPU: float32 only" if q and d == "cpu" else None,
        ),
        Step(
            "verify-float32",
            [*sb, "verify", str(fp32), "--device", d, "--json", *verify_args],
            0,
            stdout_to=w / "verify-float32.json",
        ),
        Step("cpu-checks", cpu_checks, 0),
        Step(
            "unit-tests",
            [*unit, "--junitxml", str(w / "unit-tests.xml")],
            0,
            skip="--quick: the full suite runs in CI (make test)" if q else None,
        ),
    ]
    for step in steps:
        step.timeout_s = QUICK_TIMEOUT_S if q else TIMEOUTS[step.name]
    return steps


def _optional_ignores(ctx: Context) -> list[str]:
    """Workers when pytest-xdist is there (the GPU image has it; --dist loadfile keeps each test
    file in one process, as in a serial run). The Parquet / Hugging Face loader tests need pyarrow
    and datasets: without them they are left out (the log shows the command)."""
    extra = ["-n", "8", "--dist", "loadfile"] if _imports(ctx, "xdist") else []
    if _imports(ctx, "pyarrow, datasets"):
        return extra
    return [
        *extra,
        "--ignore",
        "tests/unit/test_data.py",
        "--deselect",
        "tests/unit/test_cli_accept_rows.py::test_csv_parquet_and_jsonl_rows_parse_alike",
    ]


# Steps that may run side by side with --jobs > 1 (--quick, where timings are not the point):
# physics reads the run's α, so it follows the run.
CHAINS = [
    ["run", "physics"],
    ["verify-float32", "verify-bfloat16", "gpu-tests"],
    ["accept", "cpu-checks", "unit-tests"],
]


def run_chains(steps: list[Step], ctx: Context, jobs: int) -> list[StepResult]:
    """Run the steps, in order with one job, else CHAINS side by side; results in step order."""
    by_name = {s.name: s for s in steps}
    chains = [list(by_name)] if jobs <= 1 else [[n for n in c if n in by_name] for c in CHAINS]
    assert sorted(n for c in chains for n in c) == sorted(by_name), "every step in one chain"

    def chain(names: list[str]) -> list[StepResult]:
        done = []
        for name in names:
            r = run_step(by_name[name], ctx)
            print(f"  {r.name}: {r.status} ({r.wall_s:.1f} s) {r.note}", flush=True)
            done.append(r)
        return done

    with ThreadPoolExecutor(max_workers=max(len(chains), 1)) as pool:
        finished = {r.name: r for rs in pool.map(chain, chains) for r in rs}
    return [finished[name] for name in by_name]


# --------------------------------------------------------------------------------------------
# reading what the steps wrote


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def junit_counts(path: Path) -> dict[str, int] | None:
    """tests / failures / errors / skipped summed over the testsuites of a junit XML file."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    keys = ("tests", "failures", "errors", "skipped")
    counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return counts


def verify_figures(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(doc, dict):
        return None
    # one greedy entry per drafter (the config's and the n-gram one verify adds): summed
    greedy = doc.get("greedy") or []
    greedy = [greedy] if isinstance(greedy, dict) else greedy
    mt = doc.get("multiple_testing") or {}

    def total(key: str) -> Any:
        vals = [g.get(key) for g in greedy if g.get(key) is not None]
        return sum(vals) if vals else None

    rates = [g["token_identity_rate"] for g in greedy if g.get("token_identity_rate") is not None]
    return {
        "passed": doc.get("passed"),
        "dtype": greedy[0].get("dtype") if greedy else None,
        "greedy_runs": total("runs"),
        "greedy_identical_runs": total("identical_runs"),
        "token_identity_rate": min(rates) if rates else None,
        "near_tie_flips": total("near_tie_flips"),
        "near_tie_tolerance": greedy[0].get("near_tie_tolerance") if greedy else None,
        "chi2_tests": mt.get("tests"),
        "min_adjusted_p": mt.get("min_adjusted_p_value"),
        "family_significance": mt.get("family_significance"),
    }


def run_figures(doc: dict[str, Any] | None) -> list[dict[str, Any]]:
    rows = []
    for e in (doc or {}).get("workloads") or []:
        rec = e.get("recommendation") or {}
        rows.append(
            {
                "workload": e.get("workload"),
                "temperature": e.get("temperature"),
                "alpha": (e.get("alpha") or {}).get("value"),
                "baseline_step_ms": e.get("baseline_step_ms"),
                "peak_memory_mb": e.get("baseline_peak_memory_mb"),
                "verdict": rec.get("verdict"),
                "gamma": rec.get("gamma"),
                "speedup": (rec.get("speedup") or {}).get("value"),
            }
        )
    return rows


def accept_figures(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(doc, dict):
        return None
    overall = doc.get("overall") or {}
    settings = [
        {
            "setting": s.get("setting"),
            "alpha": (s.get("alpha") or {}).get("value"),
            "verdict": (s.get("plan") or {}).get("verdict"),
            "gamma": (s.get("plan") or {}).get("gamma"),
            "speedup": ((s.get("plan") or {}).get("speedup") or {}).get("value"),
        }
        for s in overall.get("settings") or []
    ]
    return {
        "measured_timing": doc.get("measured_timing"),
        "pair": doc.get("pair"),
        "overall": settings,
    }


# --------------------------------------------------------------------------------------------
# the summary


def _f(value: Any, fmt: str = "{:.3f}") -> str:
    return fmt.format(value) if isinstance(value, int | float) else "–"


def summary_rows(res: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(figure, value, note) for every figure of the check, in reading order."""
    rows: list[tuple[str, str, str]] = []
    env = res.get("env") or {}
    ph = res.get("physics") or {}
    rows.append(
        (
            "device",
            f"{res['device']} ({ph.get('gpu') or env.get('gpu') or env.get('cpu') or '?'})",
            "",
        )
    )
    rows.append(
        (
            "software",
            f"torch {ph.get('torch') or env.get('torch')}, transformers "
            f"{ph.get('transformers') or env.get('transformers')}, python {res['python_version']}",
            "",
        )
    )
    if env.get("gpu_query") == "nvidia-smi":
        rows.append(
            (
                "GPU state (nvidia-smi)",
                f"{env.get('gpu_count')} × {env.get('gpu_name')}, driver {env.get('gpu_driver')} "
                f"(CUDA {env.get('cuda_driver')}), runtime CUDA {env.get('cuda')}",
                f"SM clock {env.get('gpu_clock_sm_mhz')} of {env.get('gpu_clock_max_sm_mhz')} MHz, "
                f"power limit {env.get('gpu_power_limit_w')} W, MIG {env.get('gpu_mig_mode')}, "
                f"ECC {env.get('gpu_ecc_mode')}, other processes: {env.get('gpu_other_processes')}",
            )
        )
    elif env.get("gpu_query"):
        rows.append(("GPU state (nvidia-smi)", "not recorded", str(env["gpu_query"])))
    for s in res["steps"]:
        rows.append((f"step {s['name']}", f"{s['status'].upper()} {s['wall_s']:.1f} s", s["note"]))
    if ph:
        for name, m in ph["models"].items():
            rows.append(
                (
                    f"sized {name}",
                    f"{m['params'] / 1e6:.1f} M params",
                    f"{m['layers']} layer(s) × {m['hidden']}, {ph['dtype']}, random weights",
                )
            )
        b1 = ph["batch1"]
        ctx_note = f"batch 1, context {ph['context_len']}, median of {ph['reps']['batch1']}"
        rows.append(("T_ar: target decode step", f"{_f(b1['t_target_ms'])} ms", ctx_note))
        rows.append(
            (
                "T_d: draft decode step",
                f"{_f(b1['t_draft_ms'])} ms",
                f"cost ratio c = {_f(b1['cost_ratio'])}",
            )
        )
        vm = b1["verify_ms"]
        rows.append(
            (
                "T_t(k), k = 1, 4, 8, 16",
                " / ".join(_f(vm.get(k, vm.get(str(k))), "{:.2f}") for k in (1, 4, 8, 16)) + " ms",
                "verify over k + 1 tokens",
            )
        )
        fit = ph["verify_fit"]
        lo, hi = fit["growth_ci95"]
        rows.append(
            (
                "verify fit T_t(k) = t0 + t1·k",
                f"{_f(fit['t0_ms'])} + {_f(fit['t1_ms_per_token'], '{:.4f}')}·k ms",
                f"t1 95 % CI [{_f(fit['t1_ci95'][0], '{:.4f}')}, {_f(fit['t1_ci95'][1], '{:.4f}')}]",
            )
        )
        rows.append(
            (
                "verify flat in k?",
                f"{fit['label']}: growth 1→16 {100 * fit['growth_1_to_16']:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]",
                "flat: upper end < 10 %; grows: lower end > 10 % (each 2.5 % error)",
            )
        )
        if ph.get("weight_read_floor_ms") is not None:
            rows.append(
                (
                    "weight-read floor",
                    f"{_f(ph['weight_read_floor_ms'])} ms",
                    f"target bytes at the measured copy bandwidth {_f(ph['copy_bandwidth_gbs'], '{:.0f}')} GB/s; T_ar / floor = {_f(b1['t_target_ms'] / ph['weight_read_floor_ms'], '{:.1f}')}",
                )
            )
        for r in ph["batch"]:
            v = r["verify_ms"]
            v8 = v.get(8, v.get("8"))
            mem = f", peak {r['peak_memory_mb'] / 1024:.1f} GiB" if r.get("peak_memory_mb") else ""
            rows.append(
                (
                    f"batch {r['batch']}: T_ar / T_d / T_t(8)",
                    f"{_f(r['t_target_ms'], '{:.2f}')} / {_f(r['t_draft_ms'], '{:.2f}')} / {_f(v8, '{:.2f}')} ms",
                    f"T_t(8)/T_ar = {_f(v8 / r['t_target_ms'], '{:.2f}')}{mem}",
                )
            )
        tc = ph["timer_check"]
        if tc.get("ran"):
            detail = ", ".join(f"{r['step']} {100 * r['rel_diff']:+.1f} %" for r in tc["rows"])
            rows.append(
                (
                    "timer agreement (wall vs CUDA events)",
                    f"{'PASS' if tc['passed'] else 'FAIL'}: max {100 * tc['max_abs_rel_diff']:.2f} %",
                    f"tolerance {100 * tc['tolerance']:.0f} %; {detail}",
                )
            )
        else:
            rows.append(("timer agreement (wall vs CUDA events)", "skipped", tc.get("reason", "")))
        pred = ph.get("predictions") or {}
        for p in pred.get("workloads") or []:
            per_b = ", ".join(
                f"b={r['batch']}: {'off' if r['best_gamma'] == 0 else 'γ=' + str(r['best_gamma'])} {r['speedup']:.2f}×"
                for r in p["by_batch"]
            )
            curve = " ".join(f"{r['speedup']:.2f}" for r in p["batch1"])
            rows.append(
                (
                    f"predicted speedup {p['workload']} T={p['temperature']:g}",
                    f"α {p['alpha']:.3f}: "
                    + (
                        f"best γ {p['best_gamma']} → {p['best_speedup']:.2f}×"
                        if p["best_gamma"]
                        else "off: no γ pays"
                    )
                    + " at batch 1",
                    f"γ=1…{len(p['batch1'])}: {curve}; {per_b}",
                )
            )
        if pred.get("alpha_source"):
            rows.append(("predictions' acceptance", "tiny pair", pred["alpha_source"]))
    for dtype, v in (res.get("verify") or {}).items():
        if v:
            rows.append(
                (
                    f"verify {dtype}",
                    "LOSSLESS" if v["passed"] else "FAILED",
                    f"greedy {v['greedy_identical_runs']}/{v['greedy_runs']} runs identical, token identity {_f(v['token_identity_rate'])}, near-tie flips {v['near_tie_flips']} (tolerance {v['near_tie_tolerance']}); {v['chi2_tests']} χ² tests, min Bonferroni p {_f(v['min_adjusted_p'], '{:.3g}')}",
                )
            )
    for r in res.get("run") or []:
        verdict = f"{str(r['verdict']).upper()}" + (
            f" γ={r['gamma']}" if r["verdict"] == "on" else ""
        )
        rows.append(
            (
                f"run {r['workload']} T={r['temperature']:g}",
                f"{verdict}, {_f(r['speedup'], '{:.2f}')}×",
                f"α {_f(r['alpha'])}, baseline step {_f(r['baseline_step_ms'], '{:.2f}')} ms, peak memory {_f(r['peak_memory_mb'], '{:.0f}')} MB",
            )
        )
    acc = res.get("accept")
    if acc:
        mt = acc.get("measured_timing") or {}
        rows.append(
            (
                "accept measured timing",
                f"T_ar {_f(mt.get('t_target_ms'))} ms, T_d {_f(mt.get('t_draft_ms'))} ms",
                f"tiny pair on {mt.get('device')}, {(acc.get('pair') or {}).get('dtype')}",
            )
        )
        for s in acc["overall"]:
            rows.append(
                (
                    f"accept (all) {s['setting']}",
                    f"{str(s['verdict']).upper()}"
                    + (f" γ={s['gamma']}" if s["verdict"] == "on" else ""),
                    f"α {_f(s['alpha'])}, speedup {_f(s['speedup'], '{:.2f}')}×",
                )
            )
    for name, t in (res.get("tests") or {}).items():
        if t:
            rows.append(
                (
                    name,
                    f"{t['passed']} passed, {t['failures'] + t['errors']} failed, {t['skipped']} skipped",
                    "",
                )
            )
    return rows


def write_summary(res: dict[str, Any], path: Path) -> None:
    head = (
        f"# specbench GPU check — {res['date']}\n\n"
        f"{'**passed**' if res['passed'] else '**FAILED**: ' + ', '.join(res['failed_steps'])} · "
        f"device {res['device']}{' · --quick' if res['quick'] else ''} · total {res['total_wall_s']:.0f} s "
        f"of a {res['budget_s']:.0f} s budget · commit {res['commit'] or '?'}\n\n"
    )

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| figure | value | note |", "|---|---|---|"]
    lines += [f"| {cell(a)} | {cell(b)} | {cell(c)} |" for a, b, c in summary_rows(res)]
    path.write_text(head + "\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for the ≤ 8 result files")
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:1 or cpu")
    p.add_argument("--quick", action="store_true", help="small shapes and few prompts (CI)")
    p.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one)")
    p.add_argument(
        "--budget-s", type=float, help=f"total seconds ({FULL_BUDGET_S}; --quick {QUICK_BUDGET_S})"
    )
    p.add_argument("--jobs", type=int, help="steps side by side (default 1; --quick 3)")
    p.add_argument(
        "--wheels", type=Path, default=REPO / ".gpu-wheels", help="carried wheels folder"
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not (args.device == "cpu" or args.device.startswith("cuda")):
        print(f"error: --device must be cuda, cuda:N or cpu, got '{args.device}'", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="specbench-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    budget = args.budget_s or (QUICK_BUDGET_S if args.quick else FULL_BUDGET_S)
    (work / "logs").mkdir(exist_ok=True)
    ctx = Context(args.out, work, args.device, args.quick, budget, sys.executable, args.wheels)
    ctx.env["PYTHONUNBUFFERED"] = "1"
    ctx.env.setdefault("HF_HUB_OFFLINE", "1")  # nothing is fetched: the pair is shipped
    _prepend_path(ctx, REPO)
    if args.device == "cpu":  # small models: one thread avoids OpenMP spin-waits on busy cores
        ctx.env.setdefault("OMP_NUM_THREADS", "1")
    jobs = args.jobs or (3 if args.quick else 1)
    print(
        f"gpu check: device {args.device}{' --quick' if args.quick else ''}, budget {budget:.0f} s, {jobs} job(s), work {work}",
        flush=True,
    )
    results = [install(ctx, 120)]
    print(
        f"  install: {results[0].status} ({results[0].wall_s:.1f} s) {results[0].note}", flush=True
    )
    steps = plan_steps(ctx) if results[0].status != "fail" else []
    results += run_chains(steps, ctx, jobs)
    total = time.monotonic() - ctx.started
    with open(args.out / "log.txt", "w") as log:
        for r in results:
            log.write(f"===== {r.name} =====\n")
            step_log = work / "logs" / f"{r.name}.log"
            log.write(step_log.read_text(errors="replace") if step_log.is_file() else "")
            log.write("\n")

    run_dir = work / "run"
    physics = _json(work / "physics.json")
    env = _json(run_dir / "env.json") or {}
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    failed = [r.name for r in results if r.status in ("fail", "timeout")]
    res: dict[str, Any] = {
        "schema": 1,
        "kind": "gpu_check",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit or None,
        "device": args.device,
        "quick": args.quick,
        "python_version": sys.version.split()[0],
        "budget_s": budget,
        "total_wall_s": total,
        "passed": not failed,
        "failed_steps": failed,
        "steps": [asdict(r) for r in results],
        "env": env,
        "physics": physics,
        "verify": {
            d: verify_figures(_json(work / f"verify-{d}.json")) for d in ("bfloat16", "float32")
        },
        "run": run_figures(_json(run_dir / "results.json")),
        "accept": accept_figures(_json(work / "accept.json")),
        "tests": {
            n: junit_counts(work / f"{n}.xml") for n in ("gpu-tests", "cpu-checks", "unit-tests")
        },
    }
    (args.out / "results.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    (args.out / "env.json").write_text(
        json.dumps(
            env or {"python": sys.version, "note": "the run step wrote no env.json"}, indent=2
        )
        + "\n"
    )
    verify_docs = {d: _json(work / f"verify-{d}.json") for d in ("bfloat16", "float32")}
    (args.out / "verify.json").write_text(json.dumps(verify_docs, indent=2) + "\n")
    for src, dst in (
        (run_dir / "results.json", "run-results.json"),
        (run_dir / "report.md", "run-report.md"),
        (work / "accept.json", "accept.json"),
    ):
        if src.is_file():
            shutil.copyfile(src, args.out / dst)
    write_summary(res, args.out / "summary.md")
    print(
        f"{'passed' if not failed else 'FAILED: ' + ', '.join(failed)} in {total:.0f} s; summary: {args.out / 'summary.md'}",
        flush=True,
    )
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
