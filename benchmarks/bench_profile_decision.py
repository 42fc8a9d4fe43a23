"""The decision at the deployment profile: its false ON / false OFF rates and its power by number
of blocks (repeats), measured on the seeded continuous-batching server of
`analysis.calibration.serving_queue` (docs/theory.md §22, "Measured").

Rows: the null (K copies of OFF, gain exactly 1, decided at θ0 = 1) for K = 1 and 3; the power
of a real γ = 3 setting (true gain ≈ 1.5) at 1, 2, 3 and 5 blocks.

    .venv/bin/python benchmarks/bench_profile_decision.py            # ~10 min on two busy cores
    .venv/bin/python benchmarks/bench_profile_decision.py --reps 200 # quicker, wider MC error

Exit code 0 when every null row's false ON and false OFF rates are within 2.5 % + 2 MC SE.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

from specbench.analysis.calibration.serving_queue import outcome_rates

NOMINAL = 0.025


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000, help="replicates per row (1 to 100000)")
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    if not 1 <= args.reps <= 100_000:
        print("error: --reps must be in [1, 100000]", file=sys.stderr)
        return 2
    ok = True
    print(f"| case | blocks | K | ON | OFF | UNDECIDED | MC se | seconds |  ({args.reps} reps)")
    print("|---|---|---|---|---|---|---|---|")
    rows = [("null", b, k) for k in (1, 3) for b in (2, 3, 5)]
    rows += [("power", b, 1) for b in (1, 2, 3, 5)]
    for case, blocks, k in rows:
        t0 = time.perf_counter()
        r = outcome_rates(case, args.reps, blocks, k=k, seed=args.seed)  # type: ignore[arg-type]
        secs = time.perf_counter() - t0
        print(
            f"| {case} | {blocks} | {k} | {r['on']:.1%} | {r['off']:.1%} | "
            f"{r['undecided']:.1%} | {r['mc_se']:.1%} | {secs:.0f} |",
            flush=True,
        )
        if case == "null":
            limit = NOMINAL + 2 * math.sqrt(NOMINAL * (1 - NOMINAL) / args.reps)
            ok &= r["on"] <= limit and r["off"] <= limit
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
