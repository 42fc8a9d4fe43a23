"""matplotlib figures (PNG). The only module that imports matplotlib; always the Agg backend."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from specbench.analysis.roi import Scenario
from specbench.report.roi import scenario_title


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
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
