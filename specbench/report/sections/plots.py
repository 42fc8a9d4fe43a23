"""matplotlib figures (PNG). The only module that imports matplotlib; always the Agg backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from specbench.analysis.arithmetic.roi import Scenario
from specbench.analysis.documents.results_model_engine import ConcurrencyLatency
from specbench.analysis.documents.results_model_workload import WorkloadResult
from specbench.analysis.pipeline.acceptance_detail import MIN_POSITION_ROUNDS
from specbench.report.render.figure_file import save_figure
from specbench.report.roi.roi import scenario_title


def _legend(ax: Any, fontsize: int) -> None:
    """A legend only where something is labelled (engine runs leave some plots without labelled
    series; matplotlib would warn "No artists with labels found")."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=fontsize)


def plot_roi(path: Path, scenarios: list[Scenario]) -> None:
    """Speedup against γ, one curve per scenario, each curve's peak marked, a line at 1×."""
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for sc in scenarios:
        gammas = [r.gamma for r in sc.rows]
        speedups = [r.speedup for r in sc.rows]
        (line,) = ax.plot(gammas, speedups, marker="o", ms=3, label=scenario_title(sc))
        peak = max(sc.rows, key=lambda r: r.speedup)
        ax.plot([peak.gamma], [peak.speedup], marker="*", ms=14, color=line.get_color())
        ax.annotate(
            f"γ={peak.gamma}, {peak.speedup:.2f}×",
            (peak.gamma, peak.speedup),
            textcoords="offset points",
            xytext=(6, 6),
            fontsize=8,
        )
    ax.axhline(1.0, color="grey", ls="--", lw=1, label="no speculation (1×)")
    ax.set_xlabel("γ (draft tokens per round)")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_title("Predicted speedup against γ")
    ax.grid(alpha=0.3)
    _legend(ax, fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def plot_speedup(path: Path, entry: WorkloadResult) -> None:
    """Measured speedup per γ with CI bars, both predicted curves, the chosen γ, the 1× line."""
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=100)
    rows = entry.gammas
    g_all = [r.gamma for r in rows]
    for model, style, ys in (
        ("iid", "--", [r.predicted_speedup.iid for r in rows]),
        ("empirical", ":", [r.predicted_speedup.empirical for r in rows]),
    ):
        pts = [(g, y) for g, y in zip(g_all, ys, strict=True) if y is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), style, label=f"predicted ({model} ā)")
    meas = [
        (r.gamma, r.measured_speedup.value, r.measured_speedup.ci95)
        for r in rows
        if r.measured_speedup is not None and r.measured_speedup.value is not None
    ]
    if meas:
        xs = [g for g, _, _ in meas]
        ys_m = [y for _, y, _ in meas]
        lo = [y - (ci[0] or y) for _, y, ci in meas]
        hi = [(ci[1] or y) - y for _, y, ci in meas]
        ax.errorbar(
            xs, ys_m, yerr=[lo, hi], fmt="o", capsize=4, color="black", label="measured (95% CI)"
        )
    rec = entry.recommendation
    if rec.verdict == "on":
        ax.axvline(rec.gamma, color="green", alpha=0.4, lw=6, label=f"recommended γ = {rec.gamma}")
    ax.axhline(1.0, color="grey", ls="--", lw=1)
    ax.set_xlabel("γ")
    ax.set_ylabel("speedup (decode tokens/s vs baseline)")
    ax.set_title(
        f"{entry.workload}, T = {entry.temperature:g}: verdict "
        + rec.verdict.upper().replace("_", " ")
    )
    ax.grid(alpha=0.3)
    _legend(ax, fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def _entry_label(e: WorkloadResult) -> str:
    return f"{e.workload}  T={e.temperature:g}"


def _grid(n: int, cols: int = 3) -> tuple[int, int]:
    cols = max(1, min(cols, n))
    return (n + cols - 1) // cols, cols


# (position, rate, interval low, interval high, enough rounds)
_Position = tuple[int, float | None, float | None, float | None, bool]


def _positions(e: WorkloadResult) -> list[_Position]:
    """a_i with its interval (transformers runs), else the bare per-position rates (engine runs)."""
    if e.per_position_detail:
        return [(d.position, d.rate, d.ci95[0], d.ci95[1], d.enough) for d in e.per_position_detail]
    return [(i + 1, r, None, None, True) for i, r in enumerate(e.per_position_acceptance or [])]


def plot_per_position(path: Path, entries: list[WorkloadResult]) -> None:
    """One small panel per workload × temperature: a_i with its 95% interval; positions reached by
    fewer than MIN_POSITION_ROUNDS rounds are grey hollow markers without a bar (a rate over a
    handful of rounds is 0 or 1 by chance, not a finding)."""
    shown = [e for e in entries if e.per_position_detail or e.per_position_acceptance]
    rows, cols = _grid(max(1, len(shown)))
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.4 * cols, 2.5 * rows + 0.6), dpi=100, squeeze=False, sharey=True
    )
    for ax, e in zip(axes.flat, shown, strict=False):
        detail = _positions(e)
        good = [(i, r, lo, hi) for i, r, lo, hi, enough in detail if r is not None and enough]
        thin = [(i, r) for i, r, _, _, enough in detail if r is not None and not enough]
        if good:
            xs = [i for i, _, _, _ in good]
            ys = [r for _, r, _, _ in good]
            lo_err = [r - (lo if lo is not None else r) for _, r, lo, _ in good]
            hi_err = [(hi if hi is not None else r) - r for _, r, _, hi in good]
            ax.errorbar(xs, ys, yerr=[lo_err, hi_err], fmt="o-", ms=4, capsize=3, color="tab:blue")
        if thin:
            ax.plot(
                [i for i, _ in thin],
                [r for _, r in thin],
                "o",
                ms=5,
                mfc="none",
                color="0.65",
            )
        n_pos = len(detail)
        ax.set_xticks(range(1, n_pos + 1))
        ax.set_xlim(0.5, n_pos + 0.5)
        ax.set_ylim(-0.02, 1.05)
        ax.set_title(_entry_label(e), fontsize=9)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("P(accept i | all before)", fontsize=8)
    for ax in axes[-1, :]:
        ax.set_xlabel("draft position i", fontsize=8)
    fig.suptitle(
        "Per-position conditional acceptance at the largest γ (95% CI; grey hollow: "
        f"fewer than {MIN_POSITION_ROUNDS} rounds reach it)",
        fontsize=9,
    )
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def _n_degenerate(e: WorkloadResult) -> int:
    return (e.content.n_degenerate if e.content else 0) or 0


def plot_alpha(path: Path, entries: list[WorkloadResult]) -> None:
    """Horizontal bars (names never collide), α over all prompts with its interval, and a hollow
    diamond for α over the non-degenerate prompts where some answers were degenerate."""
    shown = [
        (e, e.alpha.value, e.alpha.ci95)
        for e in entries
        if e.alpha is not None and e.alpha.value is not None
    ]
    fig, ax = plt.subplots(figsize=(7, 1.6 + 0.38 * max(1, len(shown))), dpi=100)
    labels: list[str] = []
    for i, (e, value, (lo, hi)) in enumerate(shown):
        n_deg = _n_degenerate(e)
        labels.append(
            _entry_label(e)
            + (
                f"  ({n_deg}/{e.content.n_prompts if e.content else None} degenerate)"
                if n_deg
                else ""
            )
        )
        ax.barh(i, value, color="tab:red" if n_deg else "tab:blue", alpha=0.75, height=0.6)
        ax.errorbar(
            value,
            i,
            xerr=[
                [value - (lo if lo is not None else value)],
                [(hi if hi is not None else value) - value],
            ],
            color="black",
            capsize=3,
        )
        clean_part = e.content.non_degenerate if e.content else None
        clean = clean_part.alpha.value if clean_part and clean_part.alpha else None
        if n_deg and clean is not None:
            ax.plot(clean, i, "D", mfc="white", mec="black", ms=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("α (exact β pooled over tokens, 95% CI)")
    ax.set_title("Acceptance by workload and temperature", fontsize=10)
    if any(_n_degenerate(e) for e, _, _ in shown):
        ax.legend(
            handles=[
                Patch(color="tab:blue", alpha=0.75, label="answers are text"),
                Patch(color="tab:red", alpha=0.75, label="some answers degenerate"),
                Line2D([], [], ls="", marker="D", mfc="white", mec="black", label="α, text only"),
            ],
            fontsize=7,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
            ncol=3,
            frameon=False,
        )
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def plot_prompt_alpha(path: Path, entry: WorkloadResult) -> None:
    """Strip plot of per-prompt α (one dot per prompt, size ∝ its tokens; degenerate answers as
    red crosses), with the token-pooled α and the request-level mean as vertical lines."""
    ppa = entry.per_prompt_alpha
    values = ppa.values if ppa else []
    fig, ax = plt.subplots(figsize=(7, 1.9), dpi=100)
    if ppa and values:
        top = max(v.tokens for v in values) or 1
        for v_i, v in enumerate(values):
            y = ((v_i * 0.618) % 1.0 - 0.5) * 0.6  # deterministic jitter
            if v.alpha is None:
                continue
            if v.degenerate:
                ax.plot(v.alpha, y, "x", color="tab:red", ms=8, mew=2)
            else:
                ax.plot(v.alpha, y, "o", color="tab:blue", alpha=0.7, ms=4 + 8 * v.tokens / top)
        pooled = ppa.token_pooled.value if ppa.token_pooled else None
        mean = ppa.request_mean.value if ppa.request_mean else None
        if pooled is not None:
            ax.axvline(pooled, color="black", lw=1.5, label=f"token-pooled α {pooled:.3f}")
        if mean is not None:
            ax.axvline(
                mean, color="tab:orange", lw=1.5, ls="--", label=f"mean of per-prompt α {mean:.3f}"
            )
        if any(v.degenerate for v in values):
            ax.plot([], [], "x", color="tab:red", mew=2, label="degenerate answer")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.6, 0.6)
    ax.set_yticks([])
    ax.set_xlabel("α per prompt (exact β, every γ run); dot size ∝ its tokens")
    ax.set_title(f"{_entry_label(entry)}: acceptance per prompt", fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def plot_verify_fit(path: Path, entries: list[WorkloadResult]) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=100)
    for e in entries:
        pts = [(r.gamma, r.t_verify_ms_median) for r in e.gammas if r.t_verify_ms_median]
        fit = e.timing.verify_fit
        t0, t1 = fit.t0_ms, fit.t1_ms_per_token
        if not pts or t0 is None or t1 is None:
            continue
        (line,) = ax.plot(
            *zip(*pts, strict=True), "o", label=f"{e.workload} T={e.temperature:g} (median)"
        )
        xs = [0, max(p[0] for p in pts)]
        ax.plot(xs, [t0 + t1 * x for x in xs], "-", color=line.get_color(), alpha=0.6)
    ax.set_xlabel("drafted tokens k (verify covers k + 1 positions)")
    ax.set_ylabel("verify time T_t (ms)")
    ax.set_title("Verify cost against γ, with the fit t0 + t1·k")
    ax.grid(alpha=0.3)
    if len(ax.get_legend_handles_labels()[0]) > 4:  # many workloads: a legend beside, not over
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        fig.set_size_inches(9, 4)
    else:
        _legend(ax, fontsize=7)  # engine runs have no verify timings
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def plot_latency_distribution(
    path: Path, entry: WorkloadResult, base: list[float], spec: list[float], gamma: int
) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=100)
    bins = 20
    ax.hist(base, bins=bins, alpha=0.6, label="baseline TPOT per prompt")
    if spec:
        ax.hist(spec, bins=bins, alpha=0.6, label=f"γ = {gamma} TPOT per prompt")
    ax.set_xlabel("per-token latency (ms)")
    ax.set_ylabel("prompts")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts, not 0.5 of a prompt
    ax.set_title(f"{entry.workload}, T = {entry.temperature:g}: per-token latency")
    _legend(ax, fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def _tpot(cell: ConcurrencyLatency | None) -> float | None:
    return cell.tpot_ms.value if cell is not None and cell.tpot_ms is not None else None


def plot_speedup_vs_concurrency(path: Path, entry: WorkloadResult) -> None:
    """Engine runs, against concurrency: left, the measured speedup (95% CI) per γ with the 1× line
    and a cross where a γ stops paying; right, the mean TPOT of the baseline and each γ."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    eng = entry.engine
    rows = eng.concurrency if eng else []
    gammas = sorted({int(g) for r in rows for g in r.gammas})
    color = {str(g): f"C{i}" for i, g in enumerate(gammas)}  # the same γ, the same colour
    for g in gammas:
        pts = [
            (r.concurrency, speed.value, speed.ci95)
            for r in rows
            if (cell := r.gammas.get(str(g))) is not None
            and (speed := cell.speedup) is not None
            and speed.value
        ]
        if pts:
            xs = [c for c, _, _ in pts]
            ys = [y for _, y, _ in pts]
            lo = [y - (ci[0] or y) for _, y, ci in pts]
            hi = [(ci[1] or y) - y for _, y, ci in pts]
            ax.errorbar(
                xs, ys, yerr=[lo, hi], marker="o", capsize=3, color=color[str(g)], label=f"γ = {g}"
            )
            sp = eng.stops_paying.get(str(g)) if eng else None
            stop = sp.stops_paying_at if sp else None
            if stop in xs:
                ax.plot([stop], [ys[xs.index(stop)]], marker="x", ms=12, color=color[str(g)])
    for label, key in (("baseline", None), *((f"γ = {g}", str(g)) for g in gammas)):
        pts2 = [
            (r.concurrency, _tpot(r.baseline if key is None else r.gammas.get(key))) for r in rows
        ]
        shown = [(c, v) for c, v in pts2 if v is not None]
        if shown:
            style = "--" if key is None else "-"
            c = "black" if key is None else color[key]
            ax2.plot(*zip(*shown, strict=True), marker="o", ls=style, color=c, label=label)
    ax.axhline(1.0, color="grey", ls="--", lw=1, label="no speculation (1×)")
    levels = [r.concurrency for r in rows]
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        if levels:
            a.set_xticks(levels, [str(c) for c in levels])
        a.set_xlabel("concurrency (requests in flight)")
        a.grid(alpha=0.3)
        _legend(a, fontsize=8)
    ax.set_ylabel("speedup (decode tokens/s vs baseline)")
    ax2.set_ylabel("TPOT (ms)")
    ax.set_title(f"{entry.workload}, T = {entry.temperature:g}: speedup")
    ax2.set_title("per-token latency")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
