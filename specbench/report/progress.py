"""Rich progress bars for `specbench run` (the engine reports through RunEvents callbacks)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class RichRunEvents:
    """One overall bar plus a line naming the workload, temperature, γ and prompt in flight."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
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

    def planned(self, total_units: int, already_done: int) -> None:
        self.progress.update(self.task, total=total_units, completed=already_done)

    def unit_started(self, workload: str, temperature: float, label: str, prompt_id: str) -> None:
        self.progress.update(
            self.task, description=f"{workload} T={temperature:g} {label} {prompt_id}"
        )

    def unit_finished(self, record: dict[str, Any]) -> None:
        if record.get("status") == "failed":
            self.failed += 1
            self.progress.console.print(
                f"[red]failed[/red] {record['workload']} γ={record['gamma']} "
                f"{record['prompt_id']}: {record.get('error')}"
            )
        self.progress.advance(self.task)
