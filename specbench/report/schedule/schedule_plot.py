"""The γ schedule's plot: closed-loop throughput against concurrency, one line per γ (measured, with the model's
prediction dashed), and the schedule's envelope (the throughput of the k it picks at each measured
concurrency)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import FormatStrFormatter

from specbench.analysis.documents.results_model_engine import GammaSchedule
from specbench.analysis.documents.results_model_workload import WorkloadResult
from specbench.report.render.figure_file import save_figure


def _concurrency_axis(ax: Axes, levels: list[int]) -> None:
    """The x axis of both schedule plots: concurrency on a log-2 scale, ticks at the measured."""
    ax.set_xscale("log", base=2)
    if levels:
        ax.set_xticks(levels, [str(c) for c in levels])
    ax.set_xlabel("concurrency (requests in flight)")


def plot_throughput_schedule(path: Path, entry: WorkloadResult) -> None:
    eng = entry.engine
    sched = eng.schedule if eng is not None else None
    if sched is None:
        return
    rows = sched.concurrencies
    gammas = sorted({int(g) for r in rows for g in r.throughput_tok_s})
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=100)
    for i, g in enumerate(gammas):
        color = "black" if g == 0 else f"C{i}"
        label = "off (no speculation)" if g == 0 else f"γ = {g}"
        pts = [(r.concurrency, r.throughput_tok_s.get(str(g))) for r in rows]
        shown = [(c, v) for c, v in pts if v is not None]
        if shown:
            ax.plot(*zip(*shown, strict=True), marker="o", color=color, label=label)
        pred = [(r.concurrency, r.predicted_throughput_tok_s.get(str(g))) for r in rows]
        pred = [(c, v) for c, v in pred if v is not None]
        if pred:
            ax.plot(*zip(*pred, strict=True), ls=":", color=color, alpha=0.7)
    env = [(r.concurrency, r.throughput_tok_s.get(str(r.gamma))) for r in rows]
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
    _concurrency_axis(ax, [r.concurrency for r in rows])
    ax.set_ylabel("throughput (output tokens/s)")
    ax.set_title(f"{entry.workload}, T = {entry.temperature:g}: throughput (dotted: model)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def plot_ratio_schedule(path: Path, sched: GammaSchedule, title: str) -> None:
    """A schedule's decision as it was taken: each γ's paired throughput ratio to no speculation
    against concurrency, with its 95 % interval (bars) and simultaneous lower bound (triangle),
    the 1 + margin line the bound must clear, and the k chosen at each concurrency (gold). The
    numbers are the schedule's own rows, so the plot and its table cannot disagree."""
    rows = sched.concurrencies
    gammas = sorted({int(g) for r in rows for g in r.throughput_ratio})
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=100)
    n = max(len(gammas), 1)
    for i, g in enumerate(gammas):
        pts = [(r.concurrency, r.throughput_ratio.get(str(g)), r.decision_lower_bound.get(str(g)))
               for r in rows]  # fmt: skip
        shown = [(c, e, lb) for c, e, lb in pts if e is not None and e.value is not None]
        if not shown:
            continue
        shift = 2 ** ((i - (n - 1) / 2) * 0.06)  # side by side on the log axis
        xs = [c * shift for c, _, _ in shown]
        vals = [float(e.value or 0.0) for _, e, _ in shown]  # not None: filtered above
        # an interval end with no honest bound at this sample size (None) is drawn as no bar
        lo = [v - float(e.ci95[0]) if e.ci95[0] is not None else 0.0
              for v, (_, e, _) in zip(vals, shown, strict=True)]  # fmt: skip
        hi = [float(e.ci95[1]) - v if e.ci95[1] is not None else 0.0
              for v, (_, e, _) in zip(vals, shown, strict=True)]  # fmt: skip
        ax.errorbar(xs, vals, yerr=[lo, hi], marker="o", capsize=3, color=f"C{i}",
                    label=f"γ = {g} (95 % CI)")  # fmt: skip
        bounds = [(x, lb) for x, (_, _, lb) in zip(xs, shown, strict=True) if lb is not None]
        if bounds:
            ax.plot(*zip(*bounds, strict=True), ls="none", marker="^", color=f"C{i}", alpha=0.6)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axhline(1.0 + sched.margin, color="grey", ls="--", lw=0.8, label="1 + margin")
    # ratios on a log axis; the view spans the point estimates (and 0.5–2 at least), so an
    # interval wider than that is drawn to the edge and the title says so
    points = [float(e.value) for r in rows for e in r.throughput_ratio.values()
              if e is not None and e.value is not None and e.value > 0]  # fmt: skip
    lo_y = min([0.5, *(p / 1.25 for p in points)])
    hi_y = max([2.0, *(p * 1.25 for p in points)])
    ends = [float(x) for r in rows for e in r.throughput_ratio.values() if e is not None
            for x in e.ci95 if x is not None]  # fmt: skip
    clipped = any(x < lo_y or x > hi_y for x in ends)
    ax.set_yscale("log")
    ax.set_ylim(lo_y, hi_y)
    ax.yaxis.set_major_formatter(FormatStrFormatter("%.2g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%.2g"))
    chosen = [(r.concurrency, r.throughput_ratio.get(str(r.gamma))) for r in rows if r.gamma]
    chosen_pts = [(c, float(e.value)) for c, e in chosen if e is not None and e.value is not None]
    if chosen_pts:
        ax.plot(*zip(*chosen_pts, strict=True), lw=6, marker="o", ms=16, alpha=0.3,
                color="gold", label="schedule (chosen k)", zorder=0)  # fmt: skip
    _concurrency_axis(ax, [r.concurrency for r in rows])
    ax.set_ylabel("throughput ÷ no speculation (paired)")
    note = "; bars clipped at the edges" if clipped else ""
    ax.set_title(f"{title}\n▲ simultaneous lower bound{note}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
