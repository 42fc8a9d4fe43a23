"""Regenerate the documentation's result tables from shipped run directories (no figure typed by
hand).

Each generated block sits between `<!-- table:NAME -->` and `<!-- /table:NAME -->` in README.md or
a page of docs/, and is rendered from a run directory's records.jsonl + config.yaml + env.json by
the same code as `specbench report` (results are recomputed; the bootstrap is seeded, so the
output is stable). Every block of TABLES must appear on some page; a page may show a block more
than once. tests/test_readme_tables.py fails while a block differs from what this script generates.

    python scripts/readme_tables.py            # rewrite the blocks (and the figures they show)
    python scripts/readme_tables.py --check    # exit 1 and name the pages and blocks that differ
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
sys.path.insert(0, str(ROOT))  # this checkout's specbench, not an installed one


def demo_table(run_dir: Path) -> str:
    """The first screen of the shipped example run: the pool-wide decision per temperature and
    each workload's own optimum (the documents' blocks, as Markdown)."""
    from specbench.analysis.documents.results_model import RunEnv
    from specbench.analysis.pipeline.results import build_results
    from specbench.harness.run.rundir import load_run
    from specbench.report.render.blocks import Box, Para, TableBlock, to_markdown
    from specbench.report.sections.decision import decision_blocks

    records, config, env, _ = load_run(run_dir)
    results = build_results(records, config, RunEnv.model_validate(env))
    every = decision_blocks(results)
    table = next(i for i, b in enumerate(every) if isinstance(b, TableBlock))
    blocks = [*[b for b in every[:table] if isinstance(b, Box)][:1], every[table]]
    if table + 1 < len(every) and isinstance(every[table + 1], Para):
        blocks.append(every[table + 1])  # the table's legend: what a parenthesized figure is
    return to_markdown(blocks).strip()


ENGINE_RUN = "docs/example-engine-run"
SCHEDULE_FIGURE = "docs/img/schedule-tiny-vllm.png"


def pool_schedule_of(run_dir: Path) -> tuple[Any, str]:
    """The pool's γ schedule of a shipped engine run at its first temperature (what `specbench
    schedule RUN_DIR` computes), and a title naming the pool."""
    from specbench.analysis.decide.pool_schedule import pool_members, pool_schedule
    from specbench.analysis.documents.results_model_engine import GammaSchedule
    from specbench.analysis.documents.settings import AnalysisSettings
    from specbench.harness.run.rundir import load_run

    records, config, _, _ = load_run(run_dir)
    s = AnalysisSettings.from_config(config)
    temps = config.sampling.temperatures if config.sampling else None
    if not temps:
        raise SystemExit(f"error: {run_dir}: the stored config names no temperature")
    temp = float(temps[0])
    members = pool_members(records, s, temp)
    doc = pool_schedule(members, s)
    if doc is None:
        raise SystemExit(f"error: {run_dir}: no pool schedule (no cell common to every workload)")
    shares = ", ".join(f"{m.workload} {m.weight:.0%}" for m in members)
    return GammaSchedule.model_validate(doc), f"pool of {shares}, T = {temp:g}"


def _est(e: Any, lb: Any) -> str:
    if e is None or e.value is None:
        return "–"
    lo, hi = (f"{x:.2f}" if x is not None else "–" for x in e.ci95)
    bound = f" ({lb:.2f})" if lb is not None else ""
    return f"{e.value:.2f}× [{lo}, {hi}]{bound}"


def schedule_table(run_dir: Path) -> str:
    """The pool's schedule of the shipped engine run: each γ's paired throughput ratio to no
    speculation with its interval and simultaneous lower bound, the choice per concurrency, and
    the `vllm serve` line `specbench schedule RUN_DIR --format vllm` writes for it."""
    import json

    from specbench.report.schedule.schedule_export import (
        Deployment,
        vllm_command,
        vllm_speculative_config,
    )

    sched, title = pool_schedule_of(run_dir)
    gammas = sorted({int(g) for r in sched.concurrencies for g in r.throughput_ratio})
    head = [
        "concurrency",
        *[f"γ={g} throughput ÷ off [95% CI] (simultaneous lower)" for g in gammas],
    ]
    lines = [f"{title}:", "", "| " + " | ".join([*head, "schedule"]) + " |"]
    lines.append("|" + "---|" * (len(head) + 1))
    for r in sched.concurrencies:
        cells = [
            _est(r.throughput_ratio.get(str(g)), r.decision_lower_bound.get(str(g))) for g in gammas
        ]
        choice = f"γ={r.gamma}" if r.gamma else "off"
        if "filled" in r.reason:
            choice += " (filled)"
        lines.append("| " + " | ".join([str(r.concurrency), *cells, choice]) + " |")
    env = json.loads((run_dir / "env.json").read_text(encoding="utf-8"))
    conf = env.get("speculative_config") or {}
    conf = conf[0] if isinstance(conf, list) else conf
    target = str((env.get("engine_args") or {}).get("model") or "MODEL")
    dep = Deployment.from_vllm(target, conf)
    ranges = [list(x) for x in sched.ranges]
    lines += [
        "",
        f"Ranges `{ranges}`; `specbench schedule {run_dir.relative_to(ROOT)} --format vllm`:",
    ]
    if any(k for _, _, k in ranges):
        base = {"method": dep.method, **({"model": dep.draft} if dep.draft else {}), **dep.options}
        cmd = vllm_command(dep.target, vllm_speculative_config(ranges, base))
        lines += ["", "    " + cmd.replace(str(ROOT) + "/", "")]
    else:  # off everywhere: the line without speculation and why (report/schedule/schedule_off.py)
        from specbench.analysis.documents.results_model import RunEnv
        from specbench.analysis.pipeline.results import build_results
        from specbench.harness.run.rundir import load_run
        from specbench.report.schedule.schedule_off import off_outcome, plain_vllm
        from specbench.report.sections.no_verdict import shows_speedup

        records, config, env, _ = load_run(run_dir)
        results = build_results(records, config, RunEnv.model_validate(env))
        unmeasured = any(e.engine is not None and not shows_speedup(e) for e in results.workloads)
        lines += [
            "",
            "    " + plain_vllm(dep.target, env.get("engine_args")),
            "    " + off_outcome(sched, unmeasured)[1],
        ]
    return "\n".join(lines)


def figures() -> list[Path]:
    """The generated figures: the pool schedule's plot, from the same numbers as its table."""
    from specbench.report.schedule.schedule_plot import plot_ratio_schedule

    sched, title = pool_schedule_of(ROOT / ENGINE_RUN)
    path = ROOT / SCHEDULE_FIGURE
    plot_ratio_schedule(path, sched, title)
    return [path]


# name → (run directory, renderer)
TABLES: dict[str, tuple[str, Callable[[Path], str]]] = {
    "demo": ("docs/example-run", demo_table),
    "schedule": (ENGINE_RUN, schedule_table),
}


def block(name: str) -> str:
    run_dir, render = TABLES[name]
    note = (
        f"<!-- generated by scripts/readme_tables.py from {run_dir}; edit the script, "
        "not this block -->"
    )
    return f"<!-- table:{name} -->\n{note}\n\n{render(ROOT / run_dir)}\n\n<!-- /table:{name} -->"


def pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- table:{name} -->.*?<!-- /table:{name} -->", re.S)


def regenerate(text: str) -> tuple[str, list[str]]:
    """One page's text with every block it holds regenerated, and the names of those that
    changed."""
    changed = []
    for name in TABLES:
        new = block(name)
        for found in reversed(list(pattern(name).finditer(text))):
            if found.group(0) != new:
                if name not in changed:
                    changed.append(name)
                text = text[: found.start()] + new + text[found.end() :]
    return text, changed


def shown_blocks(pages: list[Path] = PAGES) -> dict[str, list[Path]]:
    """Each block of TABLES with the pages that show it."""
    return {
        name: [p for p in pages if pattern(name).search(p.read_text(encoding="utf-8"))]
        for name in TABLES
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report differing blocks")
    args = parser.parse_args()
    missing = [name for name, pages in shown_blocks().items() if not pages]
    if missing:
        raise SystemExit(f"error: no page holds a <!-- table:NAME --> block for {missing}")
    stale = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        new, changed = regenerate(text)
        if not changed:
            continue
        stale.append(f"{page.relative_to(ROOT)} ({', '.join(changed)})")
        if not args.check:
            page.write_text(new, encoding="utf-8")
    if args.check:
        if stale:
            print(f"blocks out of date: {'; '.join(stale)}; run scripts/readme_tables.py")
            return 1
        return 0
    print(f"regenerated: {'; '.join(stale) or 'nothing changed'}")
    print(f"figures: {', '.join(str(p.relative_to(ROOT)) for p in figures())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
