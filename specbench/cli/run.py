"""`specbench run CONFIG`: measure speculative decoding over the workloads, then report.

    specbench run configs/tiny.yaml
    specbench run configs/tiny.yaml --gammas 1,2,4 --max-prompts 8 --temperature 0 --out reports/t
    specbench run configs/tiny.yaml --resume            # finish an interrupted run

The options become one typed request (harness/run/run_request.py: `RunRequest`; flags override the
config file, flags > file > defaults); `measure_run` hands it to harness/transformers/runner.py (transformers),
harness/transformers/adaptive.py or harness/serving/drive/driver.py (vLLM, OpenAI-compatible servers), the reports to
`cli.report.write_reports` (results.json by harness/run/rundir.py, the rest by report/).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

import specbench.cli.faults as faults
from specbench.cli.exit_codes import EXIT_INCOMPLETE, EXIT_INTERRUPTED, warn
from specbench.cli.options import (
    ConfigArgument,
    DeviceOption,
    GpuHourUsdOption,
    GpusOption,
    MaxPromptsOption,
)
from specbench.config import MAX_BUDGET_FORWARDS
from specbench.errors import SpecbenchError

if TYPE_CHECKING:  # the runner (torch) is imported only when the command runs
    from specbench.config import RunConfig
    from specbench.harness.run.lockstep import Turns
    from specbench.harness.run.run_request import RunRequest
    from specbench.harness.transformers.runner import RunOutcome


def run_incomplete(outcome: RunOutcome, max_rate: float) -> str | None:
    """The one-line reason a run is incomplete, or None. The share is over every planned unit:
    those measured now (ok or failed) and those already complete in the directory."""
    failed = len(outcome.failures)
    total = outcome.written + outcome.skipped
    if failed == 0 or total == 0 or failed / total <= max_rate:
        return None
    first = " ".join(str(outcome.failures[0].get("error") or "no error message").split())
    return (
        f"run incomplete: {failed} of {total} prompts failed ({failed / total:.0%}, above "
        f"--max-failure-rate {max_rate:g}); first: {first}; rerun with --resume to retry them"
    )


def measure(request: RunRequest, cfg: RunConfig) -> tuple[RunOutcome, Turns | None]:
    """The run with its progress on the console (and in lockstep with another run when
    `compare --ab` asks); Ctrl-C keeps the records and exits 130."""
    from specbench.harness.plan.plan import RunEvents
    from specbench.harness.run.force import replacing
    from specbench.harness.run.lockstep import LockstepEvents, Turns, parse_fds
    from specbench.harness.run.run_request import measure_run
    from specbench.report.run.console import make_console
    from specbench.report.run.progress import RichRunEvents

    out_dir = Path(cfg.output_dir)
    turns = Turns(*parse_fds(request.lockstep)) if request.lockstep is not None else None
    console = make_console()
    console.print(f"specbench run: {cfg.name} → {out_dir}")
    try:
        with replacing(out_dir, request.force), RichRunEvents(console) as rich_events:
            events: RunEvents = rich_events if turns is None else LockstepEvents(rich_events, turns)
            outcome = measure_run(request, cfg, events)
    except KeyboardInterrupt:
        typer.echo(
            f"interrupted: the records written so far are kept in {out_dir}; "
            "rerun with --resume to finish",
            err=True,
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    return outcome, turns


def report(outcome: RunOutcome, out_dir: Path, max_rate: float, turns: Turns | None) -> None:
    """The run's warnings and counts, its reports (cli/report.py) and summary; exit 4 when more
    prompts failed than --max-failure-rate allows."""
    from specbench.cli.report import write_reports
    from specbench.report.run.console import make_console, render_summary

    console = make_console()
    for note in sorted(set(outcome.warnings)):
        warn(note)
    console.print(
        f"{outcome.written} records written, {outcome.skipped} already complete, "
        f"{len(outcome.failures)} failed"
    )
    incomplete = run_incomplete(outcome, max_rate)
    if turns is not None:  # the other side of an interleaved A/B may still be measuring
        turns.before_reports()
    try:
        results, _ = write_reports(out_dir)
    except SpecbenchError as exc:
        if incomplete is None:
            raise
        warn(f"no report: {exc}")
    else:
        render_summary(console, results)
        console.print(
            f"reports: {out_dir}/report.md, report.html, results.json, summary.csv, plots/"
        )
    if incomplete is not None:
        typer.echo(f"error: {incomplete}", err=True)
        raise typer.Exit(EXIT_INCOMPLETE)


def run(
    config: ConfigArgument,
    out: Annotated[
        Path | None, typer.Option("--out", help="Run directory (default: the config's output_dir).")
    ] = None,
    gammas: Annotated[str | None, typer.Option("--gammas", help="γ grid, e.g. 1,2,4,8.")] = None,
    workloads: Annotated[
        str | None, typer.Option("--workloads", help="Only these workloads, e.g. code,chat.")
    ] = None,
    max_prompts: MaxPromptsOption = None,
    temperature: Annotated[
        list[float] | None,
        typer.Option("--temperature", help="Sampling temperature (repeatable; 0 = greedy)."),
    ] = None,
    device: DeviceOption = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Random seed.")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Finish an interrupted run in DIR.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Discard the run already in DIR and start over.")
    ] = False,
    gpu_hour_usd: GpuHourUsdOption = None,
    gpus: GpusOption = None,
    adaptive: Annotated[
        bool,
        typer.Option(
            "--adaptive",
            help="The adaptive plan: baseline and γ_max, then the predicted best γ; stop each "
            "workload when its sequential verdict is settled (config `plan: adaptive`).",
        ),
    ] = False,
    budget_minutes: Annotated[
        float | None,
        typer.Option(
            "--budget-minutes",
            min=0.0,
            help="Adaptive plan: stop measuring after this many minutes (spread over the "
            "undecided workloads; default: the config's adaptive.budget_minutes, none).",
        ),
    ] = None,
    budget_forwards: Annotated[
        int | None,
        typer.Option(
            "--budget-forwards",
            min=1,
            max=MAX_BUDGET_FORWARDS,
            help="Adaptive plan: stop measuring after this many target forwards (a budget in "
            "target steps, the same on any machine; default: adaptive.budget_forwards, none).",
        ),
    ] = None,
    keep_text: Annotated[
        bool | None,
        typer.Option(
            "--keep-text/--no-keep-text",
            help="Write prompt and answer text and raw prompt ids to the run's files (default: "
            "the config's keep_text; unset: kept for shipped prompt sets only, your data "
            "private: docs/privacy.md).",
        ),
    ] = None,
    max_failure_rate: Annotated[
        float | None,
        typer.Option(
            "--max-failure-rate",
            min=0.0,
            max=1.0,
            help="Exit 4 (run incomplete) when more than this share of the prompts failed "
            "(default: the config's max_failure_rate, 0.05).",
        ),
    ] = None,
    lockstep: Annotated[
        str | None,
        typer.Option(
            "--lockstep",
            hidden=True,
            help="R,W: take turns unit by unit with another run (`compare --ab`; "
            "harness/run/lockstep.py).",
        ),
    ] = None,
) -> None:
    """Measure speculative decoding on a model pair over the workloads, then report.

    Exit codes: 0 measured; 2 bad input; 4 run incomplete (prompts failed beyond
    --max-failure-rate; `--resume` retries them); 130 interrupted (records kept)."""
    from specbench.harness.run.run_request import RunRequest

    request = RunRequest(
        config=config,
        out=out,
        gammas=gammas,
        workloads=workloads,
        max_prompts=max_prompts,
        temperature=temperature,
        device=device,
        seed=seed,
        resume=resume,
        force=force,
        gpu_hour_usd=gpu_hour_usd,
        gpus=gpus,
        adaptive=adaptive,
        budget_minutes=budget_minutes,
        budget_forwards=budget_forwards,
        keep_text=keep_text,
        max_failure_rate=max_failure_rate,
        lockstep=lockstep,
    )
    cfg = request.run_config()
    faults.beside_run(Path(cfg.output_dir))
    outcome, turns = measure(request, cfg)
    report(outcome, Path(cfg.output_dir), request.failure_rate(cfg), turns)
