"""Request logs for the canary tests: one JSON object per request, as a gateway would log them
(timestamps, status, TPOT, end-to-end latency, output tokens, finish reason, the response text,
a bucket and the engine's per-request speculative counts on the canary)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

PROSE = "the quick brown fox jumps over the lazy dog while the cat watches from the window"


def write_logs(
    path: Path,
    seed: int,
    windows: int,
    *,
    canary: bool,
    per_window: int = 40,
    tpot_factor: float = 1.0,
    error_rate: float = 0.01,
    acceptance: dict[str, float] | None = None,
    length_factor: float = 1.0,
    window_s: float = 60.0,
    t0: float = 1_700_000_040.0,  # a multiple of 60: windows align with the epoch
    load_seed: int = 0,
) -> None:
    rng = np.random.default_rng(seed)
    # both arms run side by side: one load factor per window, shared (the same `load_seed`)
    loads = np.random.default_rng(load_seed).lognormal(0, 0.3, windows + 1)
    acc = acceptance or {"chat": 0.7, "code": 0.8}
    rows = []
    for w in range(windows + 1):  # one more window so that the last one closes
        load = loads[w]
        for _ in range(rng.poisson(per_window)):
            t = t0 + (w + rng.random()) * window_s
            bucket = "chat" if rng.random() < 0.5 else "code"
            if rng.random() < error_rate:
                rows.append({"timestamp": t, "status": 500, "bucket": bucket})
                continue
            tpot = 30.0 * load * tpot_factor * rng.lognormal(0, 0.25)
            out = int(min(max(round(200 * length_factor * rng.lognormal(0, 0.6)), 1), 1024))
            words = PROSE.split()
            text = " ".join(
                words[i % len(words)] + str(i // len(words)) for i in range(out // 4 + 1)
            )
            row = {
                "timestamp": t,
                "status": 200,
                "bucket": bucket,
                "tpot_ms": tpot,
                "e2e_ms": 200 * load + tpot * out,
                "output_tokens": out,
                "finish_reason": "length" if out >= 1024 else "stop",
                "response": text,
            }
            if canary:
                a = rng.beta(acc[bucket] * 20, (1 - acc[bucket]) * 20)
                drafts = int(np.ceil(out / (1 + 4 * a)))
                row["spec"] = {
                    "draft_tokens": drafts * 4,
                    "accepted_tokens": int(rng.binomial(drafts * 4, a)),
                    "drafts": drafts,
                }
            rows.append(row)
    rows.sort(key=lambda r: r["timestamp"])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
