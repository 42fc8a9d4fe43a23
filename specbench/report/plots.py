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

from specbench.analysis.acceptance_detail import MIN_POSITION_ROUNDS
from specbench.analysis.roi import Scenario
from specbench.report.roi import scenario_title


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
    fig.savefig(path)
    plt.close(fig)


def _slug(workload: str, temperature: float) -> str:
    return f"{workload}_T{temperature:g}".replace("/", "-")


def plot_speedup(path: Path, entry: dict[str, Any]) -> None:
    """Measured speedup per γ with CI bars, both predicted curves, the chosen γ, the 1× line."""
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=100)
    rows = entry["gammas"]
    g_all = [r["gamma"] for r in rows]
    for model, style in (("iid", "--"), ("empirical", ":")):
        ys = [r["predicted_speedup"][model] for r in rows]
        pts = [(g, y) for g, y in zip(g_all, ys, strict=True) if y is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), style, label=f"predicted ({model} ā)")
    meas = [
        r for r in rows if r.get("measured_speedup") and r["measured_speedup"]["value"] is not None
    ]
    if meas:
        xs = [r["gamma"] for r in meas]
        ys = [r["measured_speedup"]["value"] for r in meas]
        lo = [y - (r["measured_speedup"]["ci95"][0] or y) for y, r in zip(ys, meas, strict=True)]
        hi = [(r["measured_speedup"]["ci95"][1] or y) - y for y, r in zip(ys, meas, strict=True)]
        ax.errorbar(
            xs, ys, yerr=[lo, hi], fmt="o", capsize=4, color="black", label="measured (95% CI)"
        )
    rec = entry["recommendation"]
    if rec["verdict"] == "on":
        ax.axvline(
            rec["gamma"], color="green", alpha=0.4, lw=6, label=f"recommended γ = {rec['gamma']}"
        )
    ax.axhline(1.0, color="grey", ls="--", lw=1)
    ax.set_xlabel("γ")
    ax.set_ylabel("speedup (decode tokens/s vs baseline)")
    ax.set_title(
        f"{entry['workload']}, T = {entry['temperature']:g}: verdict "
        + rec["verdict"].upper().replace("_", " ")
    )
    ax.grid(alpha=0.3)
    _legend(ax, fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _entry_label(e: dict[str, Any]) -> str:
    return f"{e['workload']}  T={e['temperature']:g}"


def _grid(n: int, cols: int = 3) -> tuple[int, int]:
    cols = max(1, min(cols, n))
    return (n + cols - 1) // cols, cols


def plot_per_position(path: Path, entries: list[dict[str, Any]]) -> None:
    """One small panel per workload × temperature: a_i with its 95% interval; positions reached by
    fewer than MIN_POSITION_ROUNDS rounds are grey hollow markers without a bar (a rate over a
    handful of rounds is 0 or 1 by chance, not a finding)."""
    shown = [e for e in entries if e.get("per_position_detail") or e.get("per_position_acceptance")]
    rows, cols = _grid(max(1, len(shown)))
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.4 * cols, 2.5 * rows + 0.6), dpi=100, squeeze=False, sharey=True
    )
    for ax, e in zip(axes.flat, shown, strict=False):
        detail = e.get("per_position_detail") or [
            {"position": i + 1, "rate": r, "ci95": [None, None], "rounds": None, "enough": True}
            for i, r in enumerate(e.get("per_position_acceptance") or [])
        ]
        good = [d for d in detail if d["rate"] is not None and d["enough"]]
        thin = [d for d in detail if d["rate"] is not None and not d["enough"]]
        if good:
            xs = [d["position"] for d in good]
            ys = [d["rate"] for d in good]
            lo = [
                y - (d["ci95"][0] if d["ci95"][0] is not None else y)
                for y, d in zip(ys, good, strict=True)
            ]
            hi = [
                (d["ci95"][1] if d["ci95"][1] is not None else y) - y
                for y, d in zip(ys, good, strict=True)
            ]
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o-", ms=4, capsize=3, color="tab:blue")
        if thin:
            ax.plot(
                [d["position"] for d in thin],
                [d["rate"] for d in thin],
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
    fig.savefig(path)
    plt.close(fig)


def plot_alpha(path: Path, entries: list[dict[str, Any]]) -> None:
    """Horizontal bars (names never collide), α over all prompts with its interval, and a hollow
    diamond for α over the non-degenerate prompts where some answers were degenerate."""
    shown = [e for e in entries if (e.get("alpha") or {}).get("value") is not None]
    fig, ax = plt.subplots(figsize=(7, 1.6 + 0.38 * max(1, len(shown))), dpi=100)
    labels: list[str] = []
    for i, e in enumerate(shown):
        a = e["alpha"]
        lo, hi = a["ci95"]
        content = e.get("content") or {}
        n_deg = content.get("n_degenerate") or 0
        labels.append(
            _entry_label(e)
            + (f"  ({n_deg}/{content.get('n_prompts')} degenerate)" if n_deg else "")
        )
        ax.barh(i, a["value"], color="tab:red" if n_deg else "tab:blue", alpha=0.75, height=0.6)
        ax.errorbar(
            a["value"],
            i,
            xerr=[
                [a["value"] - (lo if lo is not None else a["value"])],
                [(hi if hi is not None else a["value"]) - a["value"]],
            ],
            color="black",
            capsize=3,
        )
        clean = ((content.get("non_degenerate") or {}).get("alpha") or {}).get("value")
        if n_deg and clean is not None:
            ax.plot(clean, i, "D", mfc="white", mec="black", ms=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("α (exact β pooled over tokens, 95% CI)")
    ax.set_title("Acceptance by workload and temperature", fontsize=10)
    if any((e.get("content") or {}).get("n_degenerate") for e in shown):
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
    fig.savefig(path)
    plt.close(fig)


def plot_prompt_alpha(path: Path, entry: dict[str, Any]) -> None:
    """Strip plot of per-prompt α (one dot per prompt, size ∝ its tokens; degenerate answers as
    red crosses), with the token-pooled α and the request-level mean as vertical lines."""
    ppa = entry.get("per_prompt_alpha") or {}
    values = ppa.get("values") or []
    fig, ax = plt.subplots(figsize=(7, 1.9), dpi=100)
    if values:
        top = max(v["tokens"] for v in values) or 1
        for v_i, v in enumerate(values):
            y = ((v_i * 0.618) % 1.0 - 0.5) * 0.6  # deterministic jitter
            if v["degenerate"]:
                ax.plot(v["alpha"], y, "x", color="tab:red", ms=8, mew=2)
            else:
                ax.plot(
                    v["alpha"], y, "o", color="tab:blue", alpha=0.7, ms=4 + 8 * v["tokens"] / top
                )
        pooled = (ppa.get("token_pooled") or {}).get("value")
        mean = (ppa.get("request_mean") or {}).get("value")
        if pooled is not None:
            ax.axvline(pooled, color="black", lw=1.5, label=f"token-pooled α {pooled:.3f}")
        if mean is not None:
            ax.axvline(
                mean, color="tab:orange", lw=1.5, ls="--", label=f"mean of per-prompt α {mean:.3f}"
            )
        if any(v["degenerate"] for v in values):
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
    fig.savefig(path)
    plt.close(fig)


def plot_verify_fit(path: Path, entries: list[dict[str, Any]]) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=100)
    for e in entries:
        pts = [
            (r["gamma"], r.get("t_verify_ms_median"))
            for r in e["gammas"]
            if r.get("t_verify_ms_median")
        ]
        fit = e["timing"]["verify_fit"]
        if not pts or fit["t0_ms"] is None:
            continue
        (line,) = ax.plot(
            *zip(*pts, strict=True), "o", label=f"{e['workload']} T={e['temperature']:g} (median)"
        )
        xs = [0, max(p[0] for p in pts)]
        ax.plot(
            xs,
            [fit["t0_ms"] + fit["t1_ms_per_token"] * x for x in xs],
            "-",
            color=line.get_color(),
            alpha=0.6,
        )
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
    fig.savefig(path)
    plt.close(fig)


def plot_latency_distribution(
    path: Path, entry: dict[str, Any], base: list[float], spec: list[float], gamma: int
) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=100)
    bins = 20
    ax.hist(base, bins=bins, alpha=0.6, label="baseline TPOT per prompt")
    if spec:
        ax.hist(spec, bins=bins, alpha=0.6, label=f"γ = {gamma} TPOT per prompt")
    ax.set_xlabel("per-token latency (ms)")
    ax.set_ylabel("prompts")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts, not 0.5 of a prompt
    ax.set_title(f"{entry['workload']}, T = {entry['temperature']:g}: per-token latency")
    _legend(ax, fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_speedup_vs_concurrency(path: Path, entry: dict[str, Any]) -> None:
    """Engine runs, against concurrency: left, the measured speedup (95% CI) per γ with the 1× line
    and a cross where a γ stops paying; right, the mean TPOT of the baseline and each γ."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    eng = entry.get("engine") or {}
    rows = eng.get("concurrency") or []
    gammas = sorted({int(g) for r in rows for g in r["gammas"]})
    color = {str(g): f"C{i}" for i, g in enumerate(gammas)}  # the same γ, the same colour
    for g in gammas:
        pts = [
            (r["concurrency"], r["gammas"][str(g)]["speedup"])
            for r in rows
            if str(g) in r["gammas"] and (r["gammas"][str(g)].get("speedup") or {}).get("value")
        ]
        if pts:
            xs = [c for c, _ in pts]
            ys = [s["value"] for _, s in pts]
            lo = [y - (s["ci95"][0] or y) for y, (_, s) in zip(ys, pts, strict=True)]
            hi = [(s["ci95"][1] or y) - y for y, (_, s) in zip(ys, pts, strict=True)]
            ax.errorbar(
                xs, ys, yerr=[lo, hi], marker="o", capsize=3, color=color[str(g)], label=f"γ = {g}"
            )
            stop = (eng.get("stops_paying") or {}).get(str(g), {}).get("stops_paying_at")
            if stop in xs:
                ax.plot([stop], [ys[xs.index(stop)]], marker="x", ms=12, color=color[str(g)])
    for label, key in (("baseline", None), *((f"γ = {g}", str(g)) for g in gammas)):
        pts2 = [
            (r["concurrency"], ((r["baseline"] if key is None else r["gammas"].get(key)) or {}))
            for r in rows
        ]
        pts2 = [(c, (d.get("tpot_ms") or {}).get("value")) for c, d in pts2]
        pts2 = [(c, v) for c, v in pts2 if v is not None]
        if pts2:
            style = "--" if key is None else "-"
            c = "black" if key is None else color[key]
            ax2.plot(*zip(*pts2, strict=True), marker="o", ls=style, color=c, label=label)
    ax.axhline(1.0, color="grey", ls="--", lw=1, label="no speculation (1×)")
    levels = [r["concurrency"] for r in rows]
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        if levels:
            a.set_xticks(levels, [str(c) for c in levels])
        a.set_xlabel("concurrency (requests in flight)")
        a.grid(alpha=0.3)
        _legend(a, fontsize=8)
    ax.set_ylabel("speedup (decode tokens/s vs baseline)")
    ax2.set_ylabel("TPOT (ms)")
    ax.set_title(f"{entry['workload']}, T = {entry['temperature']:g}: speedup")
    ax2.set_title("per-token latency")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
