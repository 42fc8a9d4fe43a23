"""Calibration of `specbench compare`: the run-to-run noise measured from real runs, and seeded
simulations of the gate's false-alarm rate (A/A) and power (weak draft, slower draft).

    from specbench.analysis.calibration.compare_calibration import aa_false_alarm_rate, power_weak_draft
    aa_false_alarm_rate(n_rep=400, seed=0)     # (rate, Monte Carlo se): target ≤ 0.05
    power_weak_draft(n_rep=200, seed=0)        # target ≥ 0.80
    power_draft_slowdown(n_rep=200, seed=0)    # target ≥ 0.80

The simulated runs have the shape of configs/tiny.yaml (workloads × T ∈ {0, 1} × γ, 8 prompts):
per prompt an acceptance rate α_p (heterogeneous), rounds of γ drafts accepted position by
position, a baseline and a speculative per-token latency with 3 % within-run noise, and per run a
machine factor on absolute timing (`timing_cv`) and an independent factor on the speedup ratio of
each workload × T × γ (`speedup_cv`) — the run-to-run noise that no single run can see, of the
size measured on this machine (`measure_run_to_run`). At T = 0 acceptance is a function of the
prompt alone (greedy decoding is deterministic), at T = 1 it is redrawn per run. No model, no
torch: records go straight into `side_from_records`, then `compare`. docs/compare.md lists the
results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specbench.analysis.compare.difference_tests import prompt_se
from specbench.analysis.compare.metrics import (
    RUN_TO_RUN_CV_SPEEDUP,
    RUN_TO_RUN_CV_TIMING,
    Thresholds,
)
from specbench.analysis.compare.sides import Side, merge_runs, side_from_records
from specbench.analysis.compare.verdict import compare
from specbench.analysis.documents.results_model import RunEnv
from specbench.config.stored import StoredConfig, StoredModel, StoredSampling
from specbench.record_line import RecordLine


@dataclass(frozen=True)
class SimSize:
    """The documented size of a simulated comparison (the shape of configs/tiny.yaml)."""

    workloads: int = 4
    n_prompts: int = 8
    gammas: tuple[int, ...] = (1, 2, 4, 8)
    temperatures: tuple[float, ...] = (0.0, 1.0)
    rounds: int = 12
    runs_per_side: int = 1


SIM_NEW_TOKENS = 64  # a baseline generation (max_new_tokens); a speculative one runs 12 rounds
SIM_TTFT_MS = 5.0
SIM_ENV = RunEnv(device="cpu", gpu=None, cpu="simulated", torch="2", transformers="5")


def _config(size: SimSize) -> StoredConfig:
    return StoredConfig(
        name="calibration",
        target=StoredModel(model="sim-target", dtype="float32"),
        draft=StoredModel(method="model", model="sim-draft", dtype="float32"),
        sampling=StoredSampling(temperatures=list(size.temperatures), top_p=1.0, top_k=0),
        gammas=list(size.gammas),
        max_new_tokens=64,
    )


def simulate_run(
    run_seed: int,
    size: SimSize = SimSize(),
    *,
    alpha_shift: float = 0.0,
    draft_slowdown: float = 0.0,
    speedup_cv: float = RUN_TO_RUN_CV_SPEEDUP,
    timing_cv: float = RUN_TO_RUN_CV_TIMING,
    prompt_seed: int = 7,
) -> list[RecordLine]:
    """The records of one simulated run. `prompt_seed` fixes what belongs to the prompts (their
    α_p, their greedy acceptance, their length); `run_seed` everything a rerun changes."""
    prompts = np.random.default_rng(prompt_seed)
    run = np.random.default_rng(run_seed)
    machine = math.exp(timing_cv * run.standard_normal())  # this run's machine speed
    t_ar, t_draft, t_verify0, t_verify1 = 20.0, 2.0, 18.0, 0.8  # ms: a tiny-pair-like cost
    out: list[RecordLine] = []
    for w in range(size.workloads):
        alpha_w = 0.55 + 0.1 * w  # workloads differ in acceptance
        for temp in size.temperatures:
            alpha_p = np.clip(
                prompts.beta(8 * alpha_w, 8 * (1 - alpha_w), size.n_prompts), 0.02, 0.98
            )
            alpha_p = np.clip(alpha_p + alpha_shift, 0.0, 1.0)
            prompt_speed = np.exp(0.05 * prompts.standard_normal(size.n_prompts))
            for i in range(size.n_prompts):
                base_tpot = t_ar * prompt_speed[i] * machine * (1 + 0.03 * run.standard_normal())
                out.append(_baseline(f"w{w}", temp, f"p{i}", base_tpot))
            # run-to-run noise of the speedup: mostly shared by the γ of one workload × T (measured:
            # group part ≈ 0.06, per-γ part ≈ 0.03 on the log scale; total ≈ speedup_cv)
            eta_group = 0.9 * speedup_cv * run.standard_normal()
            for g in size.gammas:
                eta = math.exp(eta_group + 0.44 * speedup_cv * run.standard_normal())
                greedy = np.random.default_rng([prompt_seed, w, int(temp * 10), g])
                for i in range(size.n_prompts):
                    src = greedy if temp == 0 else run
                    u = src.random((size.rounds, g))
                    if temp == 0:  # the greedy draft token is the target's or it is not
                        beta = (u < alpha_p[i]).astype(float)
                    else:
                        beta = np.full((size.rounds, g), float(alpha_p[i]))
                    ok = (u < alpha_p[i]) if temp != 0 else beta == 1.0
                    accepted = np.where(ok.all(axis=1), g, ok.argmin(axis=1))
                    tokens = 1 + int((accepted + 1).sum())
                    round_ms = g * t_draft + t_verify0 + t_verify1 * g
                    decode = size.rounds * round_ms * prompt_speed[i] * machine / eta
                    decode /= 1 - draft_slowdown  # speculative decoding that much slower
                    decode *= 1 + 0.03 * run.standard_normal()
                    out.append(_spec(f"w{w}", temp, f"p{i}", g, accepted, beta, tokens, decode))
    return out


def _baseline(workload: str, temp: float, pid: str, tpot: float) -> RecordLine:
    tokens = SIM_NEW_TOKENS
    return {
        "schema": 1,
        "kind": "baseline",
        "unit_kind": "baseline",
        "workload": workload,
        "temperature": temp,
        "gamma": 0,
        "drafter": "",
        "policy": "",
        "prompt_id": pid,
        "repeat": 0,
        "status": "ok",
        "new_tokens": tokens,
        "ttft_ms": [SIM_TTFT_MS],
        "decode_ms": tpot * (tokens - 1),
        "tpot_ms": tpot,
    }


def _spec(
    workload: str,
    temp: float,
    pid: str,
    g: int,
    accepted: np.ndarray,
    beta: np.ndarray,
    tokens: int,
    decode_ms: float,
) -> RecordLine:
    return {
        "schema": 1,
        "kind": "spec",
        "unit_kind": "spec",
        "workload": workload,
        "temperature": temp,
        "gamma": g,
        "drafter": "model",
        "policy": "fixed",
        "prompt_id": pid,
        "repeat": 0,
        "status": "ok",
        "new_tokens": tokens,
        "ttft_ms": [SIM_TTFT_MS],
        "decode_ms": decode_ms,
        "tpot_ms": decode_ms / (tokens - 1),
        "rounds": {
            "accepted": accepted.tolist(),
            "drafted": [g] * len(accepted),
            "beta": beta.tolist(),
        },
    }


def sim_side(runs: list[list[RecordLine]], size: SimSize, label: str) -> Side:
    cfg = _config(size)
    return merge_runs(
        [side_from_records(r, cfg, SIM_ENV, f"{label}{i}") for i, r in enumerate(runs)]
    )


def exit_rate(
    n_rep: int,
    seed: int,
    size: SimSize = SimSize(),
    *,
    alpha_shift: float = 0.0,
    draft_slowdown: float = 0.0,
    th: Thresholds | None = None,
) -> tuple[float, float]:
    """P(exit 1) of `compare` between simulated base and new sides, and its Monte Carlo se."""
    # the simulated sides carry no recommendation: the speedup @γ rows gate in its place
    th = th or Thresholds(bootstrap=400, gate=("alpha", "speedup"))
    hits = 0
    for rep in range(n_rep):
        s = [seed, rep]
        k = size.runs_per_side
        base = [simulate_run(hash((*s, 0, j)) % 2**32, size) for j in range(k)]
        new = [
            simulate_run(
                hash((*s, 1, j)) % 2**32,
                size,
                alpha_shift=alpha_shift,
                draft_slowdown=draft_slowdown,
            )
            for j in range(k)
        ]
        c = compare(sim_side(base, size, "base"), sim_side(new, size, "new"), th)
        hits += c.exit_code == 1
    rate = hits / n_rep
    return rate, math.sqrt(max(rate * (1 - rate), 1 / n_rep) / n_rep)


def aa_false_alarm_rate(n_rep: int, seed: int, size: SimSize = SimSize()) -> tuple[float, float]:
    """No change between the sides, run-to-run noise as measured here: target ≤ 0.05."""
    return exit_rate(n_rep, seed, size)


def power_weak_draft(n_rep: int, seed: int, size: SimSize = SimSize()) -> tuple[float, float]:
    """Every α_p lower by 0.05 in the new side (a weaker draft): target ≥ 0.80."""
    return exit_rate(n_rep, seed, size, alpha_shift=-0.05)


def power_draft_slowdown(
    n_rep: int, seed: int, size: SimSize = SimSize(runs_per_side=3), slowdown: float = 0.2
) -> tuple[float, float]:
    """Speculative decoding 20 % slower in the new side (speedup × 0.8, acceptance unchanged), at
    3 runs per side by default (one run per side cannot separate 20 % from this machine's
    run-to-run noise at Holm's level): target ≥ 0.80."""
    return exit_rate(n_rep, seed, size, draft_slowdown=slowdown)


def measure_run_to_run(runs: list[Side], n_boot: int = 2000) -> dict[str, float]:
    """Run-to-run CV of the speedup ratio and of absolute baseline tokens/s from real runs of one
    config (same code, same machine), by the method of moments over rows and run pairs:
    σ²_run ≈ mean[(Δ log value)² − se²_prompts(Δ)] / 2, Δ between two runs of one row."""
    out: dict[str, float] = {}
    for what, prefix in (("speedup", "speedup@"), ("timing", "baseline_tokens_per_s")):
        excess, raw = [], []
        for i in range(len(runs)):
            for j in range(i + 1, len(runs)):
                for key, gi in runs[i].groups.items():
                    gj = runs[j].groups.get(key)
                    if gj is None or gi.samples is None or gj.samples is None:
                        continue
                    for name in [k for k in gi.samples if k.startswith(prefix) and k in gj.samples]:
                        a, b = gi.samples[name], gj.samples[name]
                        d = math.log(b.value / a.value)
                        se, _ = prompt_se(a, b, True, n_boot, 0)
                        raw.append(d * d)
                        excess.append(d * d - (se or 0.0) ** 2)
        out[f"{what}_cv"] = math.sqrt(max(0.0, float(np.mean(excess))) / 2) if excess else math.nan
        out[f"{what}_cv_raw"] = math.sqrt(float(np.mean(raw)) / 2) if raw else math.nan
        out[f"{what}_rows"] = float(len(excess))
    return out
