"""The canary's curves: each guard's always-valid interval after every window, against its
line (PNG, matplotlib's Agg backend)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from specbench.analysis.canary.curves import Curve

MAX_PANELS = 24


def plot_curves(path: Path, curves: list[Curve], log_ratio: frozenset[str]) -> None:
    shown = curves[:MAX_PANELS]
    cols = 3
    rows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.6 * rows), squeeze=False)
    for ax, c in zip(axes.flat, shown, strict=False):
        g = c.guard
        t = np.arange(1, len(c.estimate) + 1)
        tr = np.exp if g.name in log_ratio else (lambda x: x)
        finite = np.isfinite(c.lower) & np.isfinite(c.upper)
        ax.plot(t, tr(c.estimate), color="#333", lw=1, label="estimate")
        ax.fill_between(
            t,
            tr(np.where(finite, c.lower, np.nan)),
            tr(np.where(finite, c.upper, np.nan)),
            color="#7aa6c2",
            alpha=0.4,
            label="always-valid interval",
        )
        lines = [g.center - g.line, g.center + g.line] if g.harm == "either" else [g.line]
        for y in lines:
            ax.axhline(tr(y), color="#b33", lw=1, ls="--")
        ax.set_title(g.key, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("window", fontsize=7)
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
