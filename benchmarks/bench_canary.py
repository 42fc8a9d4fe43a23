"""The canary's error rates under continuous monitoring, its power and its time to decision
(docs/canary.md, "Error rates and power"), measured by seeded simulation.

Each replicate is a synthetic canary (`analysis.canary.simulation`): windows of 60 s, 100
requests per window over both arms together (50/50, i.e. 0.83 requests/s per arm), one shared
load factor per window, a look after every window (`analysis.canary.curves.first_decision`),
for at most 8 hours (480 windows). Rows:

- A/A: nothing planted. The false roll-back rate (target ≤ α = 5 %), and the share promoted and
  the median time to promote.
- at the margin: TPOT exactly 1.05× (the margin): any roll back is false (target ≤ 5 %).
- each planted regression: the power (roll back naming the right guard within 8 h) and the median
  time to decision, in windows, hours and requests.

    .venv/bin/python benchmarks/bench_canary.py               # ~15 min on two busy cores
    .venv/bin/python benchmarks/bench_canary.py --reps 40     # quicker, wider MC error

Exit code 0 when the A/A and at-the-margin rates meet their targets within 2 MC SE, 1 otherwise.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from specbench.analysis.canary.curves import first_decision
from specbench.analysis.canary.simulation import Planted, Traffic, simulate_windows
from specbench.config.canary import CanaryConfig

WINDOWS = 480
TRAFFIC = Traffic()
CONFIG = CanaryConfig.model_validate(
    {
        "sources": {"logs": {"canary": "c.jsonl", "control": "k.jsonl"}},
        "traffic": {"canary_share": 0.05, "control_share": 0.05},
        "guards": {
            "tpot": {"slo_ms": 50},
            "e2e": {"slo_ms": 10000},
            "acceptance": {"buckets": ["chat", "code"]},
        },
    }
)

# name → (planted, the guards that may rightly name it)
PLANTED: dict[str, tuple[Planted, set[str]]] = {
    "TPOT 1.15× slower": (Planted(tpot_factor=1.15), {"tpot"}),
    "TPOT 1.10× slower": (Planted(tpot_factor=1.10), {"tpot"}),
    "errors +3 pp (1 % → 4 %)": (Planted(error_add=0.03), {"errors"}),
    "errors +1 pp (1 % → 2 %)": (Planted(error_add=0.01), {"errors"}),
    "acceptance of one bucket 0.8 → 0.3": (Planted(acceptance={"code": 0.3}), {"acceptance[code]"}),
    "output length 1.3× (not lossless)": (
        Planted(length_factor=1.3),
        {"output_length", "finish_length", "e2e", "e2e_slo"},
    ),
    "degenerate +5 pp": (Planted(degenerate_add=0.05), {"degenerate"}),
}


def _hours(windows: float) -> float:
    return windows * TRAFFIC.window_s / 3600


def run(
    name: str, planted: Planted, names: set[str] | None, reps: int, seed0: int
) -> dict[str, float]:
    actions, at, right = [], [], 0
    for r in range(reps):
        d = first_decision(CONFIG, simulate_windows(seed0 + r, WINDOWS, TRAFFIC, planted))
        actions.append(d.action)
        at.append(d.window)
        right += names is not None and d.action == "rollback" and bool(names & set(d.crossed))
    acts = np.array(actions)
    when = np.array(at, float)
    rb = float((acts == "rollback").mean())
    promoted = acts == "promote"
    decided = acts != "keep_watching"
    return {
        "rollback": rb,
        "rollback_se": math.sqrt(max(rb * (1 - rb), 1e-12) / reps),
        "power": right / reps,
        "promote": float(promoted.mean()),
        "median_windows": float(np.median(when[decided])) if decided.any() else math.nan,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200, help="A/A replicates (planted: a quarter)")
    args = ap.parse_args()
    t0 = time.time()
    per_window = TRAFFIC.requests_per_window
    print(
        f"windows of {TRAFFIC.window_s:g} s, {per_window:g} requests per window over both arms, "
        f"look after every window, at most {WINDOWS} windows ({_hours(WINDOWS):g} h); "
        f"α = {CONFIG.alpha:g} over every guard, bucket and look"
    )
    print("| scenario | replicates | roll back | named right | promote | median time to decision |")
    print("|---|---|---|---|---|---|")
    ok = True
    for name, planted, names, reps, seed0, target in [
        ("A/A", Planted(), None, args.reps, 10_000, True),
        ("TPOT at the margin (1.05×)", Planted(tpot_factor=1.05), None, args.reps, 20_000, True),
        *[
            (n, p, s, max(args.reps // 4, 10), 30_000 + 1000 * i, False)
            for i, (n, (p, s)) in enumerate(PLANTED.items())
        ],
    ]:
        r = run(name, planted, names, reps, seed0)
        mw = r["median_windows"]
        when = (
            "—"
            if math.isnan(mw)
            else f"{mw:.0f} windows = {_hours(mw):.2f} h = {mw * per_window:,.0f} requests"
        )
        named = "—" if names is None else f"{r['power']:.0%}"
        print(
            f"| {name} | {reps} | {r['rollback']:.1%} ± {r['rollback_se']:.1%} | {named} | "
            f"{r['promote']:.0%} | {when} |"
        )
        if target:
            ok &= r["rollback"] <= CONFIG.alpha + 2 * r["rollback_se"]
        sys.stdout.flush()
    print(f"({time.time() - t0:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
