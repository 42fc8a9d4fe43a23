"""The full grid against the adaptive plan (docs/theory.md §14) on the same config, in one run:
target forwards (every call of the target model's forward, counted in the runner's `Session`),
wall time, and each cell's verdict under both plans.

    .venv/bin/python benchmarks/bench_adaptive.py                              # configs/tiny.yaml
    .venv/bin/python benchmarks/bench_adaptive.py configs/tiny-policies.yaml --out /tmp/b
    .venv/bin/python benchmarks/bench_adaptive.py configs/tiny.yaml --n 24     # every prompt

A verdict agrees when both plans say ON with the same γ, or both are not ON (the full grid's OFF
means "not shown ON", which an undecided or futile adaptive cell also is). Where they differ, the line
says whether the full grid's speedup lies inside the adaptive plan's interval at its last look.
Both plans share one loaded pair; the order of the two runs alternates nothing (full first).
Prints figures; it asserts nothing (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from specbench.cli.report import write_reports
from specbench.config import deep_merge, parse_config, read_yaml
from specbench.harness.transformers import runner
from specbench.harness.transformers.adaptive import run_adaptive


def verdicts(out_dir: Path) -> dict[tuple[str, float], dict[str, Any]]:
    results = json.loads((out_dir / "results.json").read_text())
    return {(e["workload"], e["temperature"]): e for e in results["workloads"]}


def label(entry: dict[str, Any]) -> str:
    """The full grid's verdict: ON with its drafter, policy and γ, or OFF / NOT_MEASURED."""
    rec = entry["recommendation"]
    if rec["verdict"] == "on":
        return f"ON {rec.get('drafter') or 'model'} {rec.get('policy') or 'fixed'} γ={rec['gamma']}"
    return rec["verdict"].upper()


def adaptive_label(entry: dict[str, Any]) -> str:
    """The adaptive plan's sequential verdict: ON with its setting, OFF, UNDECIDED or FUTILE
    (stopped undecided: its prompts could not settle it; not ON)."""
    seq = entry.get("adaptive") or {}
    if seq.get("state") == "on":
        return f"ON {seq['chosen']}"
    return str(seq.get("state", "not_measured")).upper()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", default="configs/tiny.yaml")
    ap.add_argument("--out", default="/tmp/bench_adaptive")
    ap.add_argument("--budget-minutes", type=float, default=None)
    ap.add_argument("--n", type=int, default=None, help="prompts per workload (default: config's)")
    args = ap.parse_args()
    path = Path(args.config)
    data = read_yaml(path)
    if args.n is not None:
        data["workloads"] = [{**w, "n": args.n} for w in data["workloads"]]
    full_cfg = parse_config(deep_merge(data, {"output_dir": f"{args.out}/full"}), str(path))
    ad_cfg = parse_config(
        deep_merge(data, {"output_dir": f"{args.out}/adaptive", "plan": "adaptive"}), str(path)
    )
    session = runner.load_session(full_cfg)
    figures = {}
    for name, cfg in (("full", full_cfg), ("adaptive", ad_cfg)):
        before, t0 = session.target_forwards, time.perf_counter()
        out = Path(cfg.output_dir)
        if cfg.plan == "adaptive":
            session.cfg = cfg
            run_adaptive(
                cfg,
                out,
                force=True,
                base_dir=path.parent,
                session=session,
                budget_minutes=args.budget_minutes,
            )
        else:
            runner.run(cfg, out, force=True, base_dir=path.parent, session=session)
        figures[name] = (session.target_forwards - before, time.perf_counter() - t0)
        write_reports(out)
    full, ad = verdicts(Path(f"{args.out}/full")), verdicts(Path(f"{args.out}/adaptive"))
    print(f"config {path}")
    for name, (fwd, wall) in figures.items():
        print(f"  {name:9s} target forwards {fwd:7d}   wall {wall:7.1f} s")
    f_fwd, f_wall = figures["full"]
    a_fwd, a_wall = figures["adaptive"]
    print(f"  ratio     forwards {f_fwd / max(a_fwd, 1):.2f}×   wall {f_wall / a_wall:.2f}×")
    agree = 0
    for key, fe in full.items():
        ae = ad.get(key)
        if ae is None:
            continue
        fv, av = label(fe), adaptive_label(ae)
        same = fv == av or (not fv.startswith("ON") and not av.startswith("ON"))
        summary = (ae.get("adaptive") or {}).get("summary", "–")
        note = "agree" if same else "differ"
        if not same:
            speed = (fe["recommendation"].get("speedup") or {}).get("value")
            inside = any(
                speed is not None
                and s["interval"][0] is not None
                and s["interval"][0] <= speed <= (s["interval"][1] or float("inf"))
                for s in (ae.get("adaptive") or {}).get("sequences", [])
            )
            note += " (full verdict's speedup inside the adaptive interval)" if inside else ""
        agree += same
        print(f"  {key[0]:16s} T={key[1]:g}  full {fv:24s} adaptive {av:24s} {note}; {summary}")
    print(f"  verdicts agree in {agree} of {len(full)} cells")


if __name__ == "__main__":
    main()
