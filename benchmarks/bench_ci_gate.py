"""The shipped CI gate on real runs: false alarms under A/A, power against a planted 10 %
slowdown of the speculative path and a planted α drop, the inconclusive share, and wall time per
trial — the figures docs/ci.md states.

Real runs of the shipped tiny pair (`configs/ci-gate.yaml`, a small gating config), made once into
a pool and drawn from per trial (k runs per side, the thresholds file's plan unless
`--runs-per-side`), compared with the shipped thresholds (`ci/specbench-thresholds.yaml`):

- A/A: 2k runs of the same code and config, split into base and new;
- slowdown: the new side's speculative decode time × 1/0.9 (speedup × 0.9), planted in the
  records of real runs (the project has no switch that slows its decoding loop by a set share);
- α drop: the new side from real runs of the same config with noise of std `--logit-noise` on the
  draft's logits (`draft.logit_noise`, as configs/tiny-weak-draft.yaml); the α drop it causes is
  measured and printed.

Trials draw from one pool, so they share runs: the rates are unbiased but their Monte Carlo error
is larger than the binomial se printed (say so when quoting them).

    python benchmarks/bench_ci_gate.py --pool /tmp/gate-pool --make-runs 60 --make-weak 30
    python benchmarks/bench_ci_gate.py --pool /tmp/gate-pool --aa-trials 100 --planted-trials 40

Exit code 0 when every target is met (alarms ≤ 5 %, each planted change caught ≥ 80 %), 1 if not.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from specbench.analysis.compare.metrics import Thresholds
from specbench.analysis.compare.sides import Side, merge_runs, side_from_records
from specbench.analysis.compare.verdict import compare
from specbench.analysis.documents.results_model import RunEnv
from specbench.analysis.pipeline.results import build_results
from specbench.analysis.serving.load_cells import closed_loop
from specbench.config.stored import StoredConfig
from specbench.harness.compare.compare_inputs import load_thresholds
from specbench.harness.run.rundir import load_run

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "ci-gate.yaml"
SLOWDOWN = 0.10


def make_runs(pool: Path, kind: str, n: int, config: Path) -> None:
    """Add runs to the pool until it holds n, each timed (walls.json)."""
    (pool / kind).mkdir(parents=True, exist_ok=True)
    walls_file = pool / f"{kind}-walls.json"
    walls = json.loads(walls_file.read_text()) if walls_file.is_file() else {}
    for i in range(n):
        out = pool / kind / f"run{i:03d}"
        if (out / "records.jsonl").is_file():
            continue
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "specbench", "--plain", "run", str(config), "--out", str(out)]
        subprocess.run([*cmd, "--force"], check=True, capture_output=True)
        walls[out.name] = time.perf_counter() - t0
        walls_file.write_text(json.dumps(walls, indent=1))
        print(f"{kind} {out.name}: {walls[out.name]:.0f} s", flush=True)


def _side(
    records: list[dict[str, Any]], config: StoredConfig, env: dict[str, Any], label: str
) -> Side:
    results = build_results(records, config, RunEnv.model_validate(env))
    return side_from_records(closed_loop(records), config, env, label, results)


def slowed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with the speculative path 10 % slower: decode time × 1/(1 − 0.1)."""
    out = []
    for r in records:
        if r.get("kind") == "spec":
            r = dict(r)
            for key in ("decode_ms", "tpot_ms"):
                if r.get(key) is not None:
                    r[key] = float(r[key]) / (1 - SLOWDOWN)
        out.append(r)
    return out


def load_pool(
    pool: Path, kind: str
) -> list[tuple[Path, list[dict[str, Any]], StoredConfig, dict[str, Any]]]:
    runs = sorted(p for p in (pool / kind).glob("run*") if (p / "records.jsonl").is_file())
    return [(p, *load_run(p)[:3]) for p in runs]


def trial_rates(
    th: Thresholds,
    base_pool: list[Any],
    new_pool: list[Any],
    k: int,
    trials: int,
    seed: int,
    plant: str,
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    codes = []
    cache: dict[tuple[str, str], Side] = {}

    def side(entry: Any, slow: bool) -> Side:
        path, records, config, env = entry
        key = (str(path), "slow" if slow else "")
        if key not in cache:
            cache[key] = _side(slowed(records) if slow else records, config, env, path.name)
        return cache[key]

    same_pool = base_pool is new_pool
    for _ in range(trials):
        if same_pool:
            idx = rng.choice(len(base_pool), size=2 * k, replace=False)
            b_idx, n_idx = idx[:k], idx[k:]
        else:
            b_idx = rng.choice(len(base_pool), size=k, replace=False)
            n_idx = rng.choice(len(new_pool), size=k, replace=False)
        base = merge_runs([side(base_pool[i], False) for i in b_idx])
        new = merge_runs([side(new_pool[i], plant == "slowdown") for i in n_idx])
        codes.append(compare(base, new, th).exit_code)
    n = len(codes)
    rate = {c: sum(x == c for x in codes) / n for c in (0, 1, 5)}
    return {"trials": n, "alarm": rate[1], "inconclusive": rate[5], "pass": rate[0]}


def _se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 1 / n) / n)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pool", type=Path, required=True)
    ap.add_argument("--thresholds", type=Path, default=ROOT / "ci" / "specbench-thresholds.yaml")
    ap.add_argument("--make-runs", type=int, default=0, help="fill the A/A pool to this many runs")
    ap.add_argument(
        "--make-weak", type=int, default=0, help="fill the weak-draft pool to this many"
    )
    ap.add_argument("--logit-noise", type=float, default=0.5)
    ap.add_argument("--aa-trials", type=int, default=100)
    ap.add_argument("--planted-trials", type=int, default=40)
    ap.add_argument("--runs-per-side", type=int, default=0, help="default: the thresholds' plan")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    weak_cfg = args.pool / "weak.yaml"
    args.pool.mkdir(parents=True, exist_ok=True)
    weak_cfg.write_text(
        f"extends: {CONFIG}\nname: ci-gate-weak\ndraft: {{logit_noise: {args.logit_noise}}}\n"
    )
    if args.make_runs:
        make_runs(args.pool, "aa", args.make_runs, CONFIG)
    if args.make_weak:
        make_runs(args.pool, "weak", args.make_weak, weak_cfg)
    th = load_thresholds(args.thresholds, {})
    k = args.runs_per_side or (th.plan.runs_per_side if th.plan else 1)
    aa = load_pool(args.pool, "aa")
    walls = json.loads((args.pool / "aa-walls.json").read_text())
    wall = float(np.mean(list(walls.values()))) if walls else math.nan
    print(f"pool: {len(aa)} A/A runs ({wall:.0f} s each on average); k = {k} runs per side; "
          f"a trial measures 2k runs: {2 * k * wall / 60:.1f} min")  # fmt: skip
    if len(aa) < 2 * k:
        print(f"the A/A pool needs ≥ {2 * k} runs for k = {k}: --make-runs {2 * k}")
        return 1
    ok = True
    t0 = time.perf_counter()
    res = trial_rates(th, aa, aa, k, args.aa_trials, args.seed, "none")
    per = (time.perf_counter() - t0) / max(1, args.aa_trials)
    ok &= res["alarm"] <= 0.05 + 2 * _se(res["alarm"], args.aa_trials)
    print(f"A/A: alarms {res['alarm']:.3f} ± {_se(res['alarm'], args.aa_trials):.3f} (target ≤ 0.05), "
          f"inconclusive {res['inconclusive']:.3f}, pass {res['pass']:.3f} over {args.aa_trials} trials; "
          f"compare {per:.1f} s per trial")  # fmt: skip
    res = trial_rates(th, aa, aa, k, args.planted_trials, args.seed + 1, "slowdown")
    ok &= res["alarm"] >= 0.80 - 2 * _se(res["alarm"], args.planted_trials)
    print(f"speculative path 10 % slower: caught {res['alarm']:.3f} (target ≥ 0.80), "
          f"inconclusive {res['inconclusive']:.3f} over {args.planted_trials} trials")  # fmt: skip
    weak = load_pool(args.pool, "weak")
    if len(weak) >= k:
        base_alpha = _alpha(aa[0])
        drop = base_alpha - float(np.mean([_alpha(w) for w in weak]))
        res = trial_rates(th, aa, weak, k, args.planted_trials, args.seed + 2, "weak")
        ok &= res["alarm"] >= 0.80 - 2 * _se(res["alarm"], args.planted_trials)
        print(f"α drop {drop:.3f} (logit noise {args.logit_noise}): caught {res['alarm']:.3f} "
              f"(target ≥ 0.80), inconclusive {res['inconclusive']:.3f} over "
              f"{args.planted_trials} trials")  # fmt: skip
    else:
        print(f"α drop: not measured (the weak pool has {len(weak)} runs, k = {k})")
        ok = False
    return 0 if ok else 1


def _alpha(entry: Any) -> float:
    """The run's α pooled over its workloads × T (from its records' exact β)."""
    _, records, _, _ = entry
    beta = [
        b for r in records if r.get("kind") == "spec" for row in r["rounds"]["beta"] for b in row
    ]
    return float(np.mean(beta)) if beta else math.nan


if __name__ == "__main__":
    sys.exit(main())
