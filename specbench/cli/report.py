"""`specbench report RUN_DIR`: regenerate every report file of a run from its records.

    specbench report reports/tiny
    specbench report reports/tiny --gpu-hour-usd 2.5 --gpus 1

No model is loaded and torch is not imported: the reports are derived from records.jsonl,
config.yaml and env.json alone (harness/rundir.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from specbench.cli.options import GpuHourUsdOption, GpusOption, economics_options


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `specbench run`.")],
    gpu_hour_usd: GpuHourUsdOption = None,
    gpus: GpusOption = None,
) -> None:
    """Regenerate every report file of a run from its records (no model is loaded)."""
    import specbench.cli.faults as faults
    from specbench.cli.exit_codes import warn
    from specbench.harness.rundir import write_reports
    from specbench.report.console import make_console, render_summary

    faults.beside_run(run_dir)
    results, notes = write_reports(run_dir, economics_options(gpu_hour_usd, gpus))
    console = make_console()
    for note in notes:
        warn(note)
    render_summary(console, results)
    console.print(f"reports: {run_dir}/report.md, report.html, results.json, summary.csv, plots/")
