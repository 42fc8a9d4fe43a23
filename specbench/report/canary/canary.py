"""The canary report: the decision with its error rate, every guard's always-valid interval, the
curves, and what to do next (console, Markdown, HTML, JSON). Rendering only: it reads the typed
`CanaryDecision` and the curves `analysis.canary.curves` computed.

    specbench canary canary.yaml --once --report reports/canary
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.analysis.canary.curves import Curve
from specbench.analysis.canary.decision import CanaryDecision, GuardResult
from specbench.report.render.blocks import (
    Block,
    Box,
    Bullets,
    Heading,
    Image,
    Para,
    TableBlock,
    to_html,
    to_markdown,
)
from specbench.report.run.console import table_box

LOG_RATIO = frozenset({"tpot", "e2e", "output_length"})  # shown as canary ÷ control
TITLES = {
    "promote": "PROMOTE: every guard is non-inferior",
    "keep_watching": "KEEP WATCHING: not settled yet",
    "rollback": "ROLL BACK",
}


def _value(g: GuardResult, x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "—"
    return f"{math.exp(x):.3f}×" if g.name in LOG_RATIO else f"{x:.4f}"


def _line(g: GuardResult) -> str:
    if g.harm == "either":
        lo, hi = g.center - g.line, g.center + g.line
        return f"{_value(g, lo)} … {_value(g, hi)}"
    side = "≤" if g.harm == "above" else "≥"
    return f"{side} {_value(g, g.line)}"


def guard_rows(d: CanaryDecision) -> list[list[str]]:
    return [
        [
            g.key,
            g.status,
            _value(g, g.estimate),
            f"[{_value(g, g.lower)}, {_value(g, g.upper)}]",
            _line(g),
            str(g.windows),
            "" if g.more_windows is None else f"~{g.more_windows}",
        ]
        for g in d.guards
    ]


HEADER = ["guard", "status", "estimate", "always-valid interval", "safe side", "windows", "more"]


def headline(d: CanaryDecision) -> list[str]:
    items = [d.reason]
    items.append(
        f"error rate: every guard's sequence holds at every look with probability ≥ "
        f"{1 - d.alpha:.0%} (α = {d.alpha:g} split over {d.sequences} sequences, Bonferroni), so "
        f"a roll back or a promote is wrong with probability ≤ {d.alpha:g}"
    )
    items.append(
        f"traffic: {d.windows} windows of {d.window_s:g} s ({d.elapsed_h:.2f} h); canary "
        f"{d.requests_canary:,} requests, control {d.requests_control:,}"
    )
    if d.decision == "keep_watching":
        if d.more_windows is not None:
            items.append(
                f"likely settled after about {d.more_windows} more windows "
                f"({d.more_hours:.1f} h, {d.more_requests:,} requests over both arms at the "
                "current rate)"
            )
        else:
            items.append("too little data to say how much more traffic would settle it")
    return items


def blocks(d: CanaryDecision, plot: str | None) -> list[Block]:
    out: list[Block] = [
        Heading(f"Canary {d.name}", 1),
        Box(TITLES[d.decision] + (" (max duration reached)" if d.timed_out else ""), headline(d)),
        Heading("Guards"),
        TableBlock(HEADER, guard_rows(d)),
        Para(
            "Each interval is a confidence sequence over paired windows (docs/theory.md §20): "
            "valid at every look, however often the canary is checked. Latency and output length "
            "are canary ÷ control of the window centres (medians from request logs, means from "
            "histograms); shares are canary − control."
        ),
    ]
    if plot:
        out.append(Image(plot, "every guard's always-valid interval after each window"))
    if d.notes:
        out += [Heading("Notes"), Bullets(d.notes)]
    return out


def render_console(console: Console, d: CanaryDecision) -> None:
    title = TITLES[d.decision] + (" (max duration reached)" if d.timed_out else "")
    console.print(f"[bold]{title}[/bold]")
    for line in headline(d):
        console.print(f"  {escape(line)}")
    table = Table(box=table_box())
    for i, h in enumerate(HEADER):
        table.add_column(h, no_wrap=i == 0)
    for row in guard_rows(d):
        table.add_row(*(escape(c) for c in row))  # "acceptance[chat]" is not rich markup
    console.print(table)
    for n in d.notes:
        console.print(f"  note: {escape(n)}")


def write_report(out_dir: Path, d: CanaryDecision, curves: list[Curve]) -> list[Path]:
    """canary.md, canary.html, canary.json (and canary-curves.png) in `out_dir`."""
    from specbench.report.canary.canary_plot import plot_curves

    out_dir.mkdir(parents=True, exist_ok=True)
    plot = None
    if curves and d.windows:
        plot = "canary-curves.png"
        plot_curves(out_dir / plot, curves, LOG_RATIO)
    b = blocks(d, plot)
    paths = [out_dir / "canary.md", out_dir / "canary.html", out_dir / "canary.json"]
    paths[0].write_text(to_markdown(b), encoding="utf-8")
    paths[1].write_text(to_html(b, out_dir, f"canary {d.name}"), encoding="utf-8")
    paths[2].write_text(json.dumps(d.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    return paths
