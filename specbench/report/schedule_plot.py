"""The γ schedule's plot: goodput against concurrency, one line per γ (measured, with the model's
prediction dashed), and the schedule's envelope (the goodput of the k it picks at each measured
concurrency)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from specbench.analysis.results_model_workload import WorkloadResult
from specbench.report.figure_file import save_figure


def plot_goodput_schedule(path: Path, entry: WorkloadResult) -> None:
    eng = entry.engine
    sched = eng.schedule if eng is not None else None
    if sched is None:
        return
    rows = sched.concurrencies
    gammas = sorted({int(g) for r in rows for g in r.goodput_tok_s})
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=100)
    for i, g in enumerate(gammas):
        color = "black" if g == 0 else f"C{i}"
        label = "off (no speculation)" if g == 0 else f"γ = {g}"
        pts = [(r.concurrency, r.goodput_tok_s.get(str(g))) for r in rows]
        shown = [(c, v) for c, v in pts if v is not None]
        if shown:
            ax.plot(*zip(*shown, strict=True), marker="o", color=color, label=label)
        pred = [(r.concurrency, r.predicted_goodput_tok_s.get(str(g))) for r in rows]
        pred = [(c, v) for c, v in pred if v is not None]
        if pred:
            ax.plot(*zip(*pred, strict=True), ls=":", color=color, alpha=0.7)
    env = [(r.concurrency, r.goodput_tok_s.get(str(r.gamma))) for r in rows]
    env = [(c, v) for c, v in env if v is not None]
    if env:
        ax.plot(
            *zip(*env, strict=True),
            lw=6,
            alpha=0.25,
            color="gold",
            label="schedule (chosen k)",
            zorder=0,
        )
    levels = [r.concurrency for r in rows]
    ax.set_xscale("log", base=2)
    if levels:
        ax.set_xticks(levels, [str(c) for c in levels])
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("goodput (output tokens/s)")
    ax.set_title(f"{entry.workload}, T = {entry.temperature:g}: goodput (dotted: model)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
