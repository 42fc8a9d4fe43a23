"""Rich progress for `specbench run` (the engine reports through RunEvents callbacks): one overall
bar, a line naming the unit in flight and, for the adaptive plan, one row per workload ×
temperature with its interval at the last look (docs/theory.md §14) drawn against the 1 + margin
line and its state."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from specbench.analysis.stats.sequential import SequentialDecision
from specbench.record_line import UnitFinished

AXIS = (0.5, 3.0)  # the speedup range the interval bar spans (log scale)
BAR_WIDTH = 28


def interval_bar(lo: float, hi: float, line: float, width: int = BAR_WIDTH) -> str:
    """The interval [lo, hi] as '━' on a log axis over AXIS, the 1 + margin line as '│';
    an end beyond the axis is drawn as an arrow ('◀' / '▶')."""
    a, b = (math.log(x) for x in AXIS)

    def col(x: float) -> int:
        if not x > 0:
            return 0
        return min(width - 1, max(0, round((math.log(x) - a) / (b - a) * (width - 1))))

    cells = ["·"] * width
    left, right = col(lo), col(hi if math.isfinite(hi) else AXIS[1])
    for i in range(left, right + 1):
        cells[i] = "━"
    cells[col(line)] = "│"
    if not lo > AXIS[0]:
        cells[0] = "◀"
    if not hi < AXIS[1]:
        cells[-1] = "▶"
    return "".join(cells)


def state_text(state: str, decision: SequentialDecision | None) -> str:
    """measuring / decided ON <setting> / decided OFF / futile / budget spent / prompts
    exhausted; the undecided ones say how many more prompts they need (futile: and how many the
    workload had left)."""
    if state == "on" and decision is not None:
        return f"[green]decided ON {decision.chosen}[/green]"
    if state == "off":
        return "[red]decided OFF[/red]"
    if state == "measuring":
        return "measuring"
    more = decision.more_prompts if decision is not None else None
    tail = f" (needs about {more} more prompts)" if more is not None else ""
    if state == "futile" and decision is not None and decision.remaining is not None:
        left = f"the workload has {decision.remaining} left"
        tail = f" (needs about {more} more prompts, {left})" if more is not None else f" ({left})"
    return f"[yellow]{state}[/yellow]{tail}"


class _CellProgress(Progress):
    """A Progress that draws the adaptive plan's cell table above its bars."""

    def __init__(self, *columns: Any, **kwargs: Any) -> None:
        self.cells: dict[tuple[str, float], tuple[str, SequentialDecision | None, float]] = {}
        super().__init__(*columns, **kwargs)

    def get_renderables(self) -> Iterable[RenderableType]:
        if self.cells:
            yield cell_table(self.cells)
        yield from super().get_renderables()


def cell_table(
    cells: dict[tuple[str, float], tuple[str, SequentialDecision | None, float]],
) -> Table:
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    for col in (
        "workload",
        "T",
        "n",
        "best speedup [interval at the last look]",
        "vs 1+margin",
        "state",
    ):
        table.add_column(col)
    for (workload, temp), (state, decision, line) in cells.items():
        bound = None
        if decision is not None and decision.bounds:
            finite = [b for b in decision.bounds if math.isfinite(b.speedup)]
            bound = max(finite, key=lambda b: b.speedup) if finite else None
        if bound is None:
            table.add_row(workload, f"{temp:g}", "–", "pilot", "", state_text(state, decision))
            continue
        hi = f"{bound.hi:.2f}" if math.isfinite(bound.hi) else "∞"
        table.add_row(
            workload,
            f"{temp:g}",
            str(bound.n),
            f"{bound.speedup:.2f}× [{bound.lo:.2f}, {hi}] {bound.label}",
            interval_bar(bound.lo, bound.hi, line),
            state_text(state, decision),
        )
    return table


class RichRunEvents:
    """One overall bar plus a line naming the workload, temperature, γ and prompt in flight; the
    adaptive plan adds its cell table (module docstring)."""

    def __init__(self, console: Console) -> None:
        self.progress = _CellProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task = self.progress.add_task("run", total=None)
        self.failed = 0

    def __enter__(self) -> RichRunEvents:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def planned(self, total_units: int | None, already_done: int) -> None:
        self.progress.update(self.task, total=total_units, completed=already_done)

    def unit_started(self, workload: str, temperature: float, label: str, prompt_id: str) -> None:
        self.progress.update(
            self.task, description=f"{workload} T={temperature:g} {label} {prompt_id}"
        )

    def unit_finished(self, unit: UnitFinished) -> None:
        if unit.failed:
            self.failed += 1
            self.progress.console.print(
                f"[red]failed[/red] {unit.workload} γ={unit.gamma} {unit.prompt_id}: {unit.error}"
            )
        self.progress.advance(self.task)

    def cell_updated(
        self, workload: str, temperature: float, state: str, decision: Any, line: float
    ) -> None:
        self.progress.cells[(workload, temperature)] = (state, decision, line)
        self.progress.refresh()
