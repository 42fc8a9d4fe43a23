"""Synthetic run records with known acceptance and timing, for testing the analysis exactly."""

from __future__ import annotations

from typing import Any

import numpy as np


def spec_record(
    rng: np.random.Generator,
    prompt_id: str,
    gamma: int,
    alphas: list[float],
    n_rounds: int,
    t_draft: float = 1.0,
    t0: float = 10.0,
    t1: float = 0.5,
    overhead: float = 0.0,
    workload: str = "w",
    temperature: float = 1.0,
    concentration: float = 4.0,
) -> dict[str, Any]:
    """Rounds where position i has exact β ~ Beta with mean alphas[i] and is accepted ~ Bernoulli(β).

    Timing: each draft step t_draft, verify t0 + t1·k, overhead per round (all in ms, noise-free).
    """
    accepted, beta_rows, draft_ms, verify_ms = [], [], [], []
    for _ in range(n_rounds):
        betas = [
            rng.beta(a * concentration, (1 - a) * concentration) if 0 < a < 1 else a
            for a in alphas[:gamma]
        ]
        n = 0
        while n < gamma and rng.random() < betas[n]:
            n += 1
        accepted.append(n)
        beta_rows.append([float(b) for b in betas])
        draft_ms.append([t_draft] * gamma)
        verify_ms.append(t0 + t1 * gamma)
    emitted = [a + 1 for a in accepted]
    new_tokens = 1 + sum(emitted)
    decode_ms = sum(sum(d) for d in draft_ms) + sum(verify_ms) + overhead * n_rounds
    return {
        "schema": 1,
        "kind": "spec",
        "unit_kind": "spec",
        "workload": workload,
        "temperature": temperature,
        "gamma": gamma,
        "drafter": "model",
        "policy": "fixed",
        "prompt_id": prompt_id,
        "repeat": 0,
        "status": "ok",
        "new_tokens": new_tokens,
        "ttft_ms": [5.0],
        "wall_ms": 5.0 + decode_ms,
        "decode_ms": decode_ms,
        "tokens_per_s": new_tokens / ((5.0 + decode_ms) / 1000),
        "tpot_ms": decode_ms / (new_tokens - 1),
        "peak_memory_mb": 100.0,
        "rounds": {
            "gamma": [gamma] * n_rounds,
            "drafted": [gamma] * n_rounds,
            "accepted": accepted,
            "emitted": emitted,
            "beta": beta_rows,
            "draft_top_prob": [[0.5] * gamma] * n_rounds,
            "draft_ms": draft_ms,
            "verify_ms": verify_ms,
            "overhead_ms": [overhead] * n_rounds,
        },
    }


def baseline_record(
    prompt_id: str, t_ar: float, new_tokens: int = 64, workload: str = "w", temperature: float = 1.0
) -> dict[str, Any]:
    decode_ms = t_ar * (new_tokens - 1)
    return {
        "schema": 1,
        "kind": "baseline",
        "unit_kind": "baseline",
        "workload": workload,
        "temperature": temperature,
        "gamma": 0,
        "drafter": "",
        "policy": "",
        "prompt_id": prompt_id,
        "repeat": 0,
        "status": "ok",
        "new_tokens": new_tokens,
        "ttft_ms": [5.0],
        "wall_ms": 5.0 + decode_ms,
        "decode_ms": decode_ms,
        "tokens_per_s": new_tokens / ((5.0 + decode_ms) / 1000),
        "tpot_ms": t_ar,
        "peak_memory_mb": 90.0,
        "step_ms": [t_ar] * (new_tokens - 1),
        "forward_ms": [t_ar] * (new_tokens - 1),
    }
