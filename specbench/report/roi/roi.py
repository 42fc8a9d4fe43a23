"""Rendering of `specbench roi` results: rich tables, verdict lines, JSON document, CSV."""

from __future__ import annotations

import csv
from dataclasses import asdict
from pathlib import Path

from pydantic import JsonValue
from rich.console import Console
from rich.table import Table

from specbench.analysis.arithmetic.roi import Economics, Scenario


def _unit(relative: bool) -> str:
    return "×T_ar" if relative else "ms"


def _fmt_time(value: float, relative: bool) -> str:
    return f"{value:.3f}" if relative else f"{value:.1f}"


def scenario_title(sc: Scenario) -> str:
    if sc.accepted is not None:
        return f"τ = {sc.accepted:g} tokens/round measured → α = {sc.alpha:.3f}"
    return f"α = {sc.alpha:g}"


def verdict_line(sc: Scenario, relative: bool) -> str:
    """One plain sentence per scenario (docs/roi.md shows these)."""
    u = " ms" if not relative else "×T_ar"
    base = _fmt_time(sc.t_target_ms, relative)
    if sc.best.gamma > 0:
        return (
            f"{scenario_title(sc)}: speculation pays: γ = {sc.best.gamma} gives "
            f"{sc.best.speedup:.2f}×, ITL {_fmt_time(sc.best.itl_ms, relative)}{u} vs {base}{u}"
        )
    top = max(sc.rows, key=lambda r: r.speedup)
    return (
        f"{scenario_title(sc)}: turn speculation off: the best γ = {top.gamma} gives "
        f"{top.speedup:.2f}×"
    )


def render_scenario(console: Console, sc: Scenario, relative: bool, show_cost_ratio: bool) -> None:
    """The scenario's table with short headers (it fits 80 columns), their meaning below it."""
    u = _unit(relative)
    table = Table(title=scenario_title(sc), title_justify="left")
    for header in ("γ", "ā", "round", "ITL", "speedup", "α_be") + (
        ("c_be",) if show_cost_ratio else ()
    ):
        table.add_column(header, justify="right", no_wrap=True)
    for row in sc.rows:
        cells = [
            str(row.gamma),
            f"{row.expected_tokens:.3f}",
            _fmt_time(row.round_ms, relative),
            _fmt_time(row.itl_ms, relative),
            f"{row.speedup:.3f}×",
            "never" if row.break_even_alpha is None else f"{row.break_even_alpha:.3f}",
        ]
        if show_cost_ratio:
            c = row.break_even_cost_ratio
            cells.append(f"{c:.3f}" if c > 0 else "never")
        best = row.gamma == sc.best.gamma
        table.add_row(*cells, style="bold green" if best else None)
    console.print(table)
    legend = (
        f"ā: tokens per round; round, ITL in {u}; α_be: break-even acceptance rate α"
        + ("; c_be: break-even cost ratio T_d/T_ar" if show_cost_ratio else "")
        + "; bold: the best γ."
    )
    console.print(legend, markup=False, highlight=False)


def scenario_to_dict(sc: Scenario) -> dict[str, JsonValue]:
    """One scenario of `roi --json`'s document, written as is."""
    return {
        "alpha": None if sc.accepted is not None else sc.alpha,
        "accepted": sc.accepted,
        "alpha_solved": sc.alpha,
        "t_target_ms": sc.t_target_ms,
        "t_draft_ms": sc.t_draft_ms,
        "verify_slope_ms": sc.verify_slope_ms,
        "rows": [
            {
                "gamma": r.gamma,
                "expected_tokens": r.expected_tokens,
                "round_ms": r.round_ms,
                "itl_ms": r.itl_ms,
                "speedup": r.speedup,
                "break_even_alpha": r.break_even_alpha,
                "break_even_cost_ratio": r.break_even_cost_ratio,
            }
            for r in sc.rows
        ],
        "best": {"gamma": sc.best.gamma, "speedup": sc.best.speedup, "itl_ms": sc.best.itl_ms},
        "verdict": sc.verdict,
    }


def economics_to_dict(econ: Economics) -> dict[str, JsonValue]:
    """A scenario's `economics` in `roi --json` (the dataclass's fields: numbers or null)."""
    return asdict(econ)


def write_csv(path: Path, scenarios: list[Scenario]) -> None:
    fields = [
        "alpha",
        "accepted",
        "t_target_ms",
        "t_draft_ms",
        "verify_slope_ms",
        "gamma",
        "expected_tokens",
        "round_ms",
        "itl_ms",
        "speedup",
        "break_even_alpha",
        "break_even_cost_ratio",
        "optimal",
    ]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for sc in scenarios:
            for r in sc.rows:
                writer.writerow(
                    {
                        "alpha": sc.alpha,
                        "accepted": "" if sc.accepted is None else sc.accepted,
                        "t_target_ms": sc.t_target_ms,
                        "t_draft_ms": sc.t_draft_ms,
                        "verify_slope_ms": sc.verify_slope_ms,
                        "gamma": r.gamma,
                        "expected_tokens": r.expected_tokens,
                        "round_ms": r.round_ms,
                        "itl_ms": r.itl_ms,
                        "speedup": r.speedup,
                        "break_even_alpha": ""
                        if r.break_even_alpha is None
                        else r.break_even_alpha,
                        "break_even_cost_ratio": r.break_even_cost_ratio,
                        "optimal": int(r.gamma == sc.best.gamma),
                    }
                )
