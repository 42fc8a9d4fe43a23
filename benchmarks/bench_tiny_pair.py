"""Decode-step latency of the shipped tiny target and draft, measured side by side.

One decode step = one forward of 1 new token with the KV cache, batch 1, fp32, plus the argmax.
The two models are interleaved (in blocks of `--block` consecutive steps, like a draft round, and
once more alternating every step, the draft's cold-cache worst case) so machine noise hits both
alike. Prints the medians and the ratio target / draft (docs/theory.md §4: c = T_d / T_ar is its inverse).

    .venv/bin/python benchmarks/bench_tiny_pair.py [--threads 2] [--steps 400] [--json]

Latency is machine- and load-dependent, so it is benchmarked here rather than tested.
"""

from __future__ import annotations

import os

# Passive OpenMP waiting: on a shared machine, spinning worker threads make a 2-thread decode step
# erratic and up to ~10x slower; an explicit OMP_WAIT_POLICY in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specbench.decoding.pairstats import decode_step_latencies, latency_summary
from specbench.models.tinypair import tiny_model_dir


def measure(
    model_root: Path | None, threads: int, steps: int, block: int, context: int
) -> dict[str, Any]:
    """Load both models from `model_root` (default: the shipped pair) and time their steps."""
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    dirs = {
        name: (model_root / name if model_root is not None else tiny_model_dir(name))
        for name in ("target", "draft")
    }
    models = {
        name: AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
        for name, d in dirs.items()
    }
    result: dict[str, Any] = {
        "threads": threads,
        "context_len": context,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "nice": os.nice(0),
    }
    for label, blk, n in (("blocked", block, steps), ("alternating", 1, steps // 2)):
        lat = latency_summary(decode_step_latencies(models, context, n, block=blk))
        result[label] = {
            "block": blk,
            "n_steps": n,
            "target_ms_median": lat["target_ms_median"],
            "draft_ms_median": lat["draft_ms_median"],
            "ratio_target_over_draft": lat["target_ms_median"] / lat["draft_ms_median"],
        }
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, default=None, help="pair root (default: shipped pair)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=400, help="timed steps per model (blocked)")
    ap.add_argument("--block", type=int, default=8)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--json", action="store_true", help="print one JSON object only")
    args = ap.parse_args(argv)
    res = measure(args.dir, args.threads, args.steps, args.block, args.context)
    if args.json:
        print(json.dumps(res))
        return
    print(
        f"decode step, batch 1, fp32, {args.threads} threads, context {args.context}+, "
        f"OMP_WAIT_POLICY={res['omp_wait_policy']}"
    )
    for label in ("blocked", "alternating"):
        r = res[label]
        print(
            f"  {label:<11} (block {r['block']:>2}, {r['n_steps']} steps): "
            f"target {r['target_ms_median']:.3f} ms  draft {r['draft_ms_median']:.3f} ms  "
            f"ratio {r['ratio_target_over_draft']:.2f}"
        )


if __name__ == "__main__":
    main()
