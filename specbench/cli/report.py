"""`specbench report RUN_DIR`: regenerate every report file of a run from its records.

    specbench report reports/tiny
    specbench report reports/tiny --gpu-hour-usd 2.5 --gpus 1

No model is loaded and torch is not imported: the reports are derived from records.jsonl,
config.yaml and env.json alone. `write_reports` (also the end of `specbench run`) has the harness
write results.json (harness/run/rundir.py), then report/ render the rest from the typed results.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from specbench.cli.options import GpuHourUsdOption, GpusOption
from specbench.harness.run.run_request import economics_options

if TYPE_CHECKING:
    from specbench.analysis.documents.results_model import RunResults


def write_reports(
    run_dir: Path, economics: dict[str, Any] | None = None
) -> tuple[RunResults, list[str]]:
    """Write results.json, summary.csv, report.md, report.html and plots/ of a run directory;
    return the typed results and the warnings met reading the run. `economics` ({gpu_hour_usd,
    gpus}; None values ignored) overrides the stored config's."""
    from specbench.harness.run.rundir import write_results
    from specbench.report.run.documents import write_run_files

    results, latency, notes = write_results(run_dir, economics)
    write_run_files(run_dir, results, latency)
    return results, notes


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `specbench run`.")],
    gpu_hour_usd: GpuHourUsdOption = None,
    gpus: GpusOption = None,
) -> None:
    """Regenerate every report file of a run from its records (no model is loaded)."""
    import specbench.cli.faults as faults
    from specbench.cli.exit_codes import warn
    from specbench.report.run.console import make_console, render_summary

    faults.beside_run(run_dir)
    results, notes = write_reports(run_dir, economics_options(gpu_hour_usd, gpus))
    console = make_console()
    for note in notes:
        warn(note)
    render_summary(console, results)
    console.print(f"reports: {run_dir}/report.md, report.html, results.json, summary.csv, plots/")
