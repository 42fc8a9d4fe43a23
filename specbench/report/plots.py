"""matplotlib figures (PNG). The only module that imports matplotlib; always the Agg backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

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
        f"{entry['workload']}, T = {entry['temperature']:g}: verdict {rec['verdict'].upper()}"
    )
    ax.grid(alpha=0.3)
    _legend(ax, fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_per_position(path: Path, entries: list[dict[str, Any]]) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=100)
    for e in entries:
        rates = e.get("per_position_acceptance") or []
        pts = [(i + 1, r) for i, r in enumerate(rates) if r is not None]
        if pts:
            ax.plot(
                *zip(*pts, strict=True), marker="o", label=f"{e['workload']} T={e['temperature']:g}"
            )
    ax.set_xlabel("draft position i")
    ax.set_ylabel("P(accept i | accepted < i)")
    ax.set_ylim(0, 1.02)
    ax.set_title("Per-position conditional acceptance (largest γ)")
    ax.grid(alpha=0.3)
    _legend(ax, fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_alpha(path: Path, entries: list[dict[str, Any]]) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=100)
    labels: list[str] = []
    vals: list[float] = []
    errs: list[list[float]] = [[], []]
    for e in entries:
        a = e.get("alpha")
        if not a or a["value"] is None:
            continue
        labels.append(f"{e['workload']}\nT={e['temperature']:g}")
        vals.append(a["value"])
        lo, hi = a["ci95"]
        errs[0].append(a["value"] - (lo if lo is not None else a["value"]))
        errs[1].append((hi if hi is not None else a["value"]) - a["value"])
    ax.bar(range(len(vals)), vals, yerr=errs, capsize=4, color="tab:blue", alpha=0.8)
    ax.set_xticks(range(len(vals)), labels, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("α (mean exact β, 95% CI)")
    ax.set_title("Acceptance by workload and temperature")
    ax.grid(alpha=0.3, axis="y")
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
