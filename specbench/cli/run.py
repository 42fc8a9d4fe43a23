"""`specbench run CONFIG`: measure speculative decoding over the workloads, then report.

    specbench run configs/tiny.yaml
    specbench run configs/tiny.yaml --gammas 1,2,4 --max-prompts 8 --temperature 0 --out reports/t
    specbench run configs/tiny.yaml --resume            # finish an interrupted run

Flags override the config file (flags > file > defaults); the run goes to harness/runner.py
(transformers) or harness/serving/driver.py (vLLM, OpenAI-compatible servers), the reports to
`cli.report.write_reports` (results.json by harness/rundir.py, the rest by report/).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import specbench.cli.faults as faults
from specbench.cli.exit_codes import EXIT_INCOMPLETE, EXIT_INTERRUPTED, warn
from specbench.cli.options import (
    ConfigArgument,
    GpuHourUsdOption,
    GpusOption,
    MaxPromptsOption,
    csv_ints,
    economics_options,
)
from specbench.config import MAX_BUDGET_FORWARDS
from specbench.errors import SpecbenchError

if TYPE_CHECKING:  # the runner (torch) is imported only when the command runs
    from specbench.harness.runner import RunOutcome


def run_overrides(
    cfg_data: dict[str, Any],
    out: Path | None,
    gammas: str | None,
    workloads: str | None,
    max_prompts: int | None,
    temperature: list[float] | None,
    device: str | None,
    seed: int | None,
) -> dict[str, Any]:
    """CLI flags as config overrides (flags > file > defaults)."""
    over: dict[str, Any] = {}
    if out is not None:
        over["output_dir"] = str(out)
    if gammas is not None:
        over["gammas"] = csv_ints(gammas, "--gammas")
        if isinstance(cfg_data.get("speculative"), dict):  # engine backends: the γ grid lives here
            over["speculative"] = {"num_speculative_tokens": over["gammas"]}
    if temperature:
        over["sampling"] = {"temperatures": list(temperature)}
    if device is not None:
        over["target"] = {"device": device}
        over["draft"] = {"device": device}
    if seed is not None:
        over["seed"] = seed
    wl_list = list(cfg_data.get("workloads") or [])
    if workloads is not None:
        wanted = [w.strip() for w in workloads.split(",") if w.strip()]
        known = [w.get("name") for w in wl_list if isinstance(w, dict)]
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise SpecbenchError(
                f"--workloads: unknown workload '{unknown[0]}'; the config has: {', '.join(map(str, known))}"
            )
        wl_list = [w for w in wl_list if w.get("name") in wanted]
    if max_prompts is not None:
        wl_list = [{**w, "n": min(int(w.get("n") or max_prompts), max_prompts)} for w in wl_list]
    if workloads is not None or max_prompts is not None:
        over["workloads"] = wl_list
    return over


def writable_dir(out_dir: Path) -> None:
    """Create the run directory and write a probe file in it; an OSError here (permission, read-
    only file system, disk full) is the environment's, one line through cli/faults.py."""
    import tempfile

    existed = out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=out_dir) as probe:
        probe.write(b"specbench")
        probe.flush()
    if not existed:  # a run refused later (a config check) must not leave its directory behind
        out_dir.rmdir()


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
    device: Annotated[
        str | None, typer.Option("--device", help="cpu, cuda, cuda:1 or auto.")
    ] = None,
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
            "harness/lockstep.py).",
        ),
    ] = None,
) -> None:
    """Measure speculative decoding on a model pair over the workloads, then report.

    Exit codes: 0 measured; 2 bad input; 4 run incomplete (prompts failed beyond
    --max-failure-rate; `--resume` retries them); 130 interrupted (records kept)."""
    from specbench.cli.report import write_reports
    from specbench.config import deep_merge, parse_config, read_yaml
    from specbench.harness import runner
    from specbench.harness.force import replacing
    from specbench.harness.lockstep import LockstepEvents, Turns, parse_fds
    from specbench.harness.plan import RunEvents
    from specbench.report.console import make_console, render_summary
    from specbench.report.progress import RichRunEvents

    if resume and force:
        raise SpecbenchError(
            "--resume and --force contradict each other: --resume finishes the run in the "
            "directory, --force discards it; give one"
        )
    data = read_yaml(config)
    over = run_overrides(data, out, gammas, workloads, max_prompts, temperature, device, seed)
    if adaptive:
        over["plan"] = "adaptive"
    if keep_text is not None:
        over["keep_text"] = keep_text
    econ = economics_options(gpu_hour_usd, gpus)
    if econ:
        over["economics"] = econ
    cfg = parse_config(deep_merge(data, over), str(config))
    for flag, value in (
        ("--budget-minutes", budget_minutes),
        ("--budget-forwards", budget_forwards),
    ):
        if value is not None and cfg.plan != "adaptive":
            raise SpecbenchError(f"{flag} bounds the adaptive plan: add --adaptive")
    if budget_minutes is not None and budget_minutes <= 0:  # before the run directory exists
        raise SpecbenchError(
            f"--budget-minutes must be > 0 (a budget of no time measures nothing), got {budget_minutes:g}"
        )
    out_dir = Path(cfg.output_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise SpecbenchError(f"the run directory {out_dir} is a file; give a directory (--out)")
    writable_dir(out_dir)  # a read-only or full place: exit 2 before the pair loads
    faults.beside_run(out_dir)
    max_rate = cfg.max_failure_rate if max_failure_rate is None else max_failure_rate
    turns = Turns(*parse_fds(lockstep)) if lockstep is not None else None
    console = make_console()
    console.print(f"specbench run: {cfg.name} → {out_dir}")
    try:
        with replacing(out_dir, force), RichRunEvents(console) as rich_events:
            events: RunEvents = rich_events if turns is None else LockstepEvents(rich_events, turns)
            opts: dict[str, Any] = {"resume": resume, "force": force, "events": events}
            outcome: RunOutcome
            if cfg.plan == "adaptive":
                from specbench.harness.adaptive import run_adaptive

                outcome = run_adaptive(
                    cfg,
                    out_dir,
                    base_dir=config.parent,
                    budget_minutes=budget_minutes,
                    budget_forwards=budget_forwards,
                    **opts,
                )
            elif cfg.backend == "transformers":
                outcome = runner.run(cfg, out_dir, base_dir=config.parent, **opts)
            else:  # vllm / openai: a serving engine
                from specbench.harness.serving.driver import run_engine

                outcome = run_engine(cfg, out_dir, base_dir=config.parent, **opts)
    except KeyboardInterrupt:
        typer.echo(
            f"interrupted: the records written so far are kept in {out_dir}; "
            "rerun with --resume to finish",
            err=True,
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
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
