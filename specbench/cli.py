"""The `specbench` command line: thin typer commands over the core functions.

Each command validates its options, calls one core function and hands the result to `report/`.
Exit codes mean one thing each, for every command (`main` and `_Group.invoke` enforce them):

    0  success: the run finished, no regression, lossless
    1  a verdict only: `compare` found a regression, `verify` found a failed check
    2  bad input: one line `error: ...` on stderr, never a traceback
    3  an unexpected internal error: one line naming the log file that holds the traceback
    4  `run` finished with failures beyond --max-failure-rate
    130  interrupted (Ctrl-C); the records written so far are kept

    specbench roi --alpha 0.6
    specbench roi --alpha 0.6 --t-target 80 --t-draft 7 --json
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from typer import _click as click  # typer >= 0.25 vendors click: its classes are these
from typer.core import TyperCommand, TyperGroup

from specbench.defaults import ROI_GAMMA_MAX
from specbench.errors import SpecbenchError, SpecbenchWarning
from specbench.report.console import make_console

EXIT_OK, EXIT_VERDICT, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INCOMPLETE = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = (
    "Exit codes: 0 success (no regression, lossless); 1 a verdict (compare: regression, verify: "
    "check failed); 2 bad input (one 'error:' line); 3 internal error (the traceback is in the "
    "log file named on stderr); 4 run finished with failures beyond --max-failure-rate; "
    "130 interrupted."
)

# Sizes a user can type, bounded so that every command stays within memory and minutes.
MAX_GAMMA = 64  # drafted tokens per round (run, verify, accept, policies)
MAX_ROI_GAMMA = 1024  # roi is analytic: a longer grid is cheap, but not unbounded
MAX_ROI_MS = 1e9  # times in ms (about 11.6 days per step): beyond any real model
MAX_ROI_RATIO = 1e6  # T_d / T_ar: a draft a million times slower than the target never pays
MAX_PROMPTS = 100_000
MAX_SAMPLES = 1_000_000  # verify: speculative rounds per context
MAX_CONTEXTS = 1_000

# Options that name a file to write: its missing parent directories are created, and a path
# that is a directory (or under a file) is refused before the command starts.
OUTPUT_FILE_PARAMS = frozenset({"csv_path", "plot_path", "markdown", "junit"})
OUTPUT_DIR_PARAMS = frozenset({"report_dir"})


def _option_name(param: click.Parameter) -> str:
    opts = [o for o in getattr(param, "opts", None) or [] if str(o).startswith("--")]
    return str(opts[0]) if opts else str(param.name or "?").upper()


def check_output_file(path: Path, option: str) -> None:
    """A file to write: refuse a directory or a parent that is a file; create missing parents."""
    if path.is_dir():
        raise SpecbenchError(f"{option}: {path} is a directory; give a file path")
    parent = path.parent
    for p in (parent, *parent.parents):
        if p.exists():
            if not p.is_dir():
                raise SpecbenchError(f"{option}: {p} is a file, not a directory")
            break
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecbenchError(f"{option}: cannot create {parent}: {exc.strerror}") from None


def check_output_dir(path: Path, option: str) -> None:
    """A directory to write into: refuse an existing file; missing directories are created."""
    if path.exists() and not path.is_dir():
        raise SpecbenchError(f"{option}: {path} is a file, not a directory")
    check_output_file(path / "x", option)


class _Command(TyperCommand):
    """Checks shared by every option of every command, before the command body runs: floats are
    finite (click's FLOAT parses 'nan' and 'inf', which no option means), output paths usable."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        for param in self.params:
            value = ctx.params.get(param.name or "")
            if value is None:
                continue
            name = _option_name(param)
            for v in value if isinstance(value, list | tuple) else [value]:
                if isinstance(v, float) and not math.isfinite(v):
                    raise SpecbenchError(f"{name} must be a finite number, got {v}")
            if param.name in OUTPUT_FILE_PARAMS:
                check_output_file(Path(value), name)
            elif param.name in OUTPUT_DIR_PARAMS:
                check_output_dir(Path(value), name)
        return rest


def crash_log(exc: BaseException) -> Path:
    """Write the traceback of an unexpected error to a log file; return its path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(tempfile.gettempdir()) / f"specbench-crash-{stamp}-{os.getpid()}.log"
    from specbench import __version__

    text = f"specbench {__version__}: internal error\nargv: {sys.argv!r}\n\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    path.write_text(text, encoding="utf-8")
    return path


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Warnings in specbench's own voice, one line each; third-party warnings (transformers,
    torch, matplotlib while loading or plotting) are dropped: they are not the user's to act on."""
    if not issubclass(category, SpecbenchWarning) and f"{os.sep}specbench{os.sep}" not in filename:
        return
    typer.echo(f"warning: {_one_line(str(message))}", err=True)


def quiet_third_party() -> None:
    """Keep stderr to specbench's own lines: no model-loading progress bars or library logs.
    Set before transformers / huggingface_hub are imported (they read these once); a user's own
    setting wins."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    if "transformers" in sys.modules:  # imported already (tests): switch it off directly
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()


class _Group(TyperGroup):
    """Every command runs through here: a SpecbenchError becomes one line and exit code 2, an
    unexpected exception exit code 3 with its traceback in a log file (never 1, the verdict code)."""

    def invoke(self, ctx: click.Context) -> Any:
        quiet_third_party()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("default")
                warnings.showwarning = _show_warning
                return super().invoke(ctx)
        except SpecbenchError as exc:
            typer.echo(f"error: {_one_line(str(exc))}", err=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except (click.exceptions.ClickException, typer.Exit, typer.Abort):
            raise
        except Exception as exc:  # a bug, not the user's input: say where the traceback is
            path = crash_log(exc)
            typer.echo(
                f"error: internal error ({type(exc).__name__}); the traceback is in {path} — "
                "please report it",
                err=True,
            )
            raise typer.Exit(EXIT_INTERNAL) from None


app = typer.Typer(
    name="specbench",
    help="Does speculative decoding pay for your model pair, hardware and traffic, and with which γ?",
    epilog=EXIT_CODES_HELP,
    cls=_Group,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEFAULT_COST_RATIO = 0.1


def _print_version(value: bool) -> None:
    if value:
        from specbench import __version__

        typer.echo(f"specbench {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback(epilog=EXIT_CODES_HELP)
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
    plain: Annotated[
        bool,
        typer.Option(
            "--plain",
            help="Plain output for CI logs: ASCII tables, no colour, no progress bars "
            "(also NO_COLOR or TERM=dumb).",
        ),
    ] = False,
) -> None:
    """Does speculative decoding pay for your model pair, hardware and traffic, and with which γ?"""
    from specbench.report.console import set_plain

    set_plain(plain)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a SpecbenchError into one line on stderr and exit code 2 (never a traceback)."""
    try:
        yield
    except SpecbenchError as exc:
        typer.echo(f"error: {_one_line(str(exc))}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None


def _fail(message: str) -> None:
    raise SpecbenchError(message)


# Pricing options shared by `run` and `report` (one declaration, one help text).
GpuHourUsdOption = Annotated[
    float | None,
    typer.Option("--gpu-hour-usd", help="Price of one GPU-hour (USD), for cost per 10⁶ tokens."),
]
GpusOption = Annotated[
    int | None, typer.Option("--gpus", help="GPUs serving the target (default 1).")
]


@app.command()
def roi(
    alpha: Annotated[
        list[float] | None,
        typer.Option("--alpha", help="Acceptance rate α in [0, 1] (repeatable)."),
    ] = None,
    accepted: Annotated[
        float | None,
        typer.Option(
            "--accepted",
            help="Measured mean tokens per round τ (incl. the bonus token) at --gamma; "
            "α is solved from it.",
        ),
    ] = None,
    t_target: Annotated[
        float | None, typer.Option("--t-target", help="Baseline per-token latency T_ar in ms.")
    ] = None,
    t_draft: Annotated[
        float | None, typer.Option("--t-draft", help="One draft step T_d in ms.")
    ] = None,
    cost_ratio: Annotated[
        float | None,
        typer.Option(
            "--cost-ratio",
            help=f"T_d / T_ar; results are then relative to T_ar (default {DEFAULT_COST_RATIO} "
            "when no timing is given).",
        ),
    ] = None,
    verify_slope: Annotated[
        float,
        typer.Option(
            "--verify-slope",
            help="Extra verify cost per drafted token (ms; in units of T_ar with --cost-ratio).",
        ),
    ] = 0.0,
    gamma_max: Annotated[
        int, typer.Option("--gamma-max", help="Largest γ to consider (1..N).")
    ] = ROI_GAMMA_MAX,
    gamma: Annotated[
        int | None,
        typer.Option(
            "--gamma",
            help="A single γ to evaluate; with --accepted, the γ at which τ was measured.",
        ),
    ] = None,
    gpu_hour_usd: Annotated[
        float | None, typer.Option("--gpu-hour-usd", help="Price of one GPU-hour in USD.")
    ] = None,
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs serving the target.")] = 1,
    draft_memory_gib: Annotated[
        float | None, typer.Option("--draft-memory-gib", help="Memory the draft adds (GiB).")
    ] = None,
    gpu_memory_gib: Annotated[
        float | None, typer.Option("--gpu-memory-gib", help="Memory of one GPU (GiB).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")
    ] = False,
    csv_path: Annotated[
        Path | None, typer.Option("--csv", help="Also write one row per scenario × γ here.")
    ] = None,
    plot_path: Annotated[
        Path | None, typer.Option("--plot", help="Also write a speedup-vs-γ PNG here.")
    ] = None,
) -> None:
    """The analytic speculation model: best γ, speedup and break-even points, no GPU needed."""
    from specbench.analysis import roi as model
    from specbench.report import roi as render

    with user_errors():
        # --- validate: one line naming the option and the allowed range ---
        if alpha and accepted is not None:
            _fail("give either --alpha or --accepted, not both")
        if not alpha and accepted is None:
            _fail("give --alpha A (in [0, 1]) or --accepted TAU --gamma G")
        for a in alpha or []:
            if not 0.0 <= a <= 1.0:
                _fail(f"--alpha must be in [0, 1], got {a:g}")
        if not 1 <= gamma_max <= MAX_ROI_GAMMA:
            _fail(f"--gamma-max must be in [1, {MAX_ROI_GAMMA}], got {gamma_max}")
        if gamma is not None and not 1 <= gamma <= MAX_ROI_GAMMA:
            _fail(f"--gamma must be in [1, {MAX_ROI_GAMMA}], got {gamma}")
        if (t_target is None) != (t_draft is None):
            _fail("--t-target and --t-draft go together: give both (in ms) or neither")
        if cost_ratio is not None and t_target is not None:
            _fail("give either --cost-ratio or --t-target/--t-draft, not both")
        # Bounds keep every derived figure finite (γ·T_d at γ = 1024 must not overflow JSON).
        for name, value in (("--t-target", t_target), ("--t-draft", t_draft)):
            if value is not None and not 0 < value <= MAX_ROI_MS:
                _fail(f"{name} must be a time > 0 ms and at most {MAX_ROI_MS:g}, got {value:g}")
        if cost_ratio is not None and not 0 < cost_ratio <= MAX_ROI_RATIO:
            _fail(f"--cost-ratio must be > 0 and at most {MAX_ROI_RATIO:g}, got {cost_ratio:g}")
        if not 0 <= verify_slope <= MAX_ROI_MS:
            _fail(f"--verify-slope must be in [0, {MAX_ROI_MS:g}], got {verify_slope:g}")
        if not 1 <= gpus <= 100_000:
            _fail(f"--gpus must be in [1, 100000], got {gpus}")
        for name, value in (
            ("--gpu-hour-usd", gpu_hour_usd),
            ("--draft-memory-gib", draft_memory_gib),
            ("--gpu-memory-gib", gpu_memory_gib),
        ):
            if value is not None and value <= 0:
                _fail(f"{name} must be > 0, got {value:g}")

        relative = t_target is None
        if relative and gpu_hour_usd is not None:
            _fail("--gpu-hour-usd needs absolute timings: give --t-target and --t-draft in ms")
        default_ratio = relative and cost_ratio is None
        if relative:
            t_target_ms, t_draft_ms = (
                1.0,
                cost_ratio if cost_ratio is not None else DEFAULT_COST_RATIO,
            )
        else:
            assert t_target is not None and t_draft is not None
            t_target_ms, t_draft_ms = t_target, t_draft

        if accepted is not None:
            if gamma is None:
                _fail("--accepted needs --gamma G, the γ at which it was measured")
            assert gamma is not None
            if not 1.0 <= accepted <= gamma + 1:
                _fail(f"--accepted must be in [1, {gamma + 1}] (1 to γ + 1) at --gamma {gamma}")
            grid = list(range(1, gamma_max + 1))
            inputs: list[tuple[float, float | None]] = [
                (model.alpha_from_accepted(accepted, gamma), accepted)
            ]
        else:
            grid = [gamma] if gamma is not None else list(range(1, gamma_max + 1))
            inputs = [(a, None) for a in alpha or []]

        scenarios = [
            model.scenario(a, grid, t_target_ms, t_draft_ms, verify_slope, accepted=tau)
            for a, tau in inputs
        ]
        econ = [
            model.economics(
                t_target_ms, sc.best.itl_ms, gpu_hour_usd, gpus, draft_memory_gib, gpu_memory_gib
            )
            for sc in scenarios
        ]
        note = (
            f"No timing given: assuming T_d / T_ar = {DEFAULT_COST_RATIO} "
            "(times in units of T_ar); pass --t-target/--t-draft or --cost-ratio."
            if default_ratio
            else None
        )

        if csv_path is not None:
            render.write_csv(csv_path, scenarios)
        if plot_path is not None:
            from specbench.report.plots import plot_roi

            plot_roi(plot_path, scenarios)

        if as_json:
            doc = {
                "units": "t_target" if relative else "ms",
                "note": note,
                "scenarios": [
                    render.scenario_to_dict(sc) | {"economics": render.economics_to_dict(e)}
                    for sc, e in zip(scenarios, econ, strict=True)
                ],
            }
            typer.echo(json.dumps(doc, indent=2, allow_nan=False))
            return

        console = make_console()
        if note:
            console.print(f"[yellow]{note}[/yellow]")
        for sc, e in zip(scenarios, econ, strict=True):
            render.render_scenario(console, sc, relative, show_cost_ratio=relative)
            console.print(render.verdict_line(sc, relative))
            if e.usd_per_million_tokens_off is not None:
                console.print(
                    f"  cost per 10⁶ output tokens at batch 1: ${e.usd_per_million_tokens_off:.2f}"
                    f" → ${e.usd_per_million_tokens_on:.2f}"
                )
            if e.draft_memory_share is not None:
                console.print(
                    f"  the draft takes {100 * e.draft_memory_share:.1f} % of GPU memory "
                    f"for {sc.best.speedup:.2f}× lower latency"
                )
        for path, what in ((csv_path, "CSV"), (plot_path, "plot")):
            if path is not None:
                console.print(f"{what} written to {path}")


def _csv_ints(value: str, option: str) -> list[int]:
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise SpecbenchError(
            f"{option} takes comma-separated integers, e.g. 1,2,4,8; got '{value}'"
        ) from None


def _run_overrides(
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
        over["gammas"] = _csv_ints(gammas, "--gammas")
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
        if not 1 <= max_prompts <= MAX_PROMPTS:
            raise SpecbenchError(f"--max-prompts must be in [1, {MAX_PROMPTS}], got {max_prompts}")
        wl_list = [{**w, "n": min(int(w.get("n") or max_prompts), max_prompts)} for w in wl_list]
    if workloads is not None or max_prompts is not None:
        over["workloads"] = wl_list
    return over


@app.command()
def run(
    config: Annotated[
        Path, typer.Argument(help="Run configuration (YAML), e.g. configs/tiny.yaml.")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="Run directory (default: the config's output_dir).")
    ] = None,
    gammas: Annotated[str | None, typer.Option("--gammas", help="γ grid, e.g. 1,2,4,8.")] = None,
    workloads: Annotated[
        str | None, typer.Option("--workloads", help="Only these workloads, e.g. code,chat.")
    ] = None,
    max_prompts: Annotated[
        int | None, typer.Option("--max-prompts", help="At most N prompts per workload.")
    ] = None,
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
    max_failure_rate: Annotated[
        float | None,
        typer.Option(
            "--max-failure-rate",
            help="Exit 4 (run incomplete) when more than this share of the prompts failed "
            "(default: the config's max_failure_rate, 0.05).",
        ),
    ] = None,
) -> None:
    """Measure speculative decoding on a model pair over the workloads, then report.

    Exit codes: 0 measured; 2 bad input; 4 run incomplete (prompts failed beyond
    --max-failure-rate; `--resume` retries them); 130 interrupted (records kept)."""
    from specbench.config import deep_merge, parse_config, read_yaml
    from specbench.harness import runner
    from specbench.report.console import render_summary
    from specbench.report.progress import RichRunEvents
    from specbench.report.writer import write_reports

    with user_errors():
        if resume and force:
            raise SpecbenchError(
                "--resume and --force contradict each other: --resume finishes the run in the "
                "directory, --force discards it; give one"
            )
        data = read_yaml(config)
        over = _run_overrides(data, out, gammas, workloads, max_prompts, temperature, device, seed)
        econ = economics_options(gpu_hour_usd, gpus)
        if econ:
            over["economics"] = econ
        cfg = parse_config(deep_merge(data, over), str(config))
        out_dir = Path(cfg.output_dir)
        if out_dir.exists() and not out_dir.is_dir():
            raise SpecbenchError(f"the run directory {out_dir} is a file; give a directory (--out)")
        if max_failure_rate is not None and not 0.0 <= max_failure_rate <= 1.0:
            raise SpecbenchError(f"--max-failure-rate must be in [0, 1], got {max_failure_rate:g}")
        max_rate = cfg.max_failure_rate if max_failure_rate is None else max_failure_rate
        console = make_console()
        console.print(f"specbench run: {cfg.name} → {out_dir}")
        try:
            with RichRunEvents(console) as events:
                opts: dict[str, Any] = {"resume": resume, "force": force, "events": events}
                if cfg.backend == "transformers":
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
            raise typer.Exit(130) from None
        for note in sorted(set(outcome.warnings)):
            console.print(f"[yellow]warning[/yellow] {note}")
        console.print(
            f"{outcome.written} records written, {outcome.skipped} already complete, "
            f"{len(outcome.failures)} failed"
        )
        incomplete = run_incomplete(outcome, max_rate)
        try:
            results, _ = write_reports(out_dir)
        except SpecbenchError as exc:
            if incomplete is None:
                raise
            console.print(f"[yellow]warning[/yellow] no report: {exc}")
        else:
            render_summary(console, results)
            console.print(
                f"reports: {out_dir}/report.md, report.html, results.json, summary.csv, plots/"
            )
        if incomplete is not None:
            typer.echo(f"error: {incomplete}", err=True)
            raise typer.Exit(EXIT_RUN_INCOMPLETE)


EXIT_RUN_INCOMPLETE = 4  # exit code: prompts failed beyond --max-failure-rate


def run_incomplete(outcome: Any, max_rate: float) -> str | None:
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


def economics_options(gpu_hour_usd: float | None, gpus: int | None) -> dict[str, Any]:
    """--gpu-hour-usd / --gpus as the config's `economics` keys (given ones only), checked."""
    if gpu_hour_usd is not None and not 0 < gpu_hour_usd <= 1e6:
        raise SpecbenchError(f"--gpu-hour-usd must be in (0, 1000000], got {gpu_hour_usd:g}")
    if gpus is not None and not 1 <= gpus <= 100_000:
        raise SpecbenchError(f"--gpus must be in [1, 100000], got {gpus}")
    return {k: v for k, v in (("gpu_hour_usd", gpu_hour_usd), ("gpus", gpus)) if v is not None}


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `specbench run`.")],
    gpu_hour_usd: GpuHourUsdOption = None,
    gpus: GpusOption = None,
) -> None:
    """Regenerate every report file of a run from its records (no model is loaded)."""
    from specbench.report.console import render_summary
    from specbench.report.writer import write_reports

    with user_errors():
        results, notes = write_reports(run_dir, economics_options(gpu_hour_usd, gpus))
        console = make_console()
        for note in notes:
            console.print(f"[yellow]warning[/yellow] {note}")
        render_summary(console, results)
        console.print(
            f"reports: {run_dir}/report.md, report.html, results.json, summary.csv, plots/"
        )


@functools.cache
def _click_command() -> Any:
    """The click group typer builds from `app` (built once: typer rebuilds it on every call)."""
    return typer.main.get_command(app)


def run_cli(args: Sequence[str]) -> int:
    """Run the CLI on `args`; return the exit code (see the module docstring)."""
    try:
        rv = _click_command().main(
            args=list(args) or ["--help"], prog_name="specbench", standalone_mode=False
        )
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        return EXIT_INTERRUPTED
    except typer.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.ClickException as exc:  # usage: bad option value, unknown option
        typer.echo(f"error: {_one_line(exc.format_message())}", err=True)
        return EXIT_BAD_INPUT
    except SpecbenchError as exc:  # raised while parsing (e.g. an option's shared checks)
        typer.echo(f"error: {_one_line(str(exc))}", err=True)
        return EXIT_BAD_INPUT
    except Exception as exc:
        path = crash_log(exc)
        typer.echo(
            f"error: internal error ({type(exc).__name__}); the traceback is in {path} — "
            "please report it",
            err=True,
        )
        return EXIT_INTERNAL
    return rv if isinstance(rv, int) else EXIT_OK


def main() -> None:
    """Console-script entry."""
    sys.exit(run_cli(sys.argv[1:]))


def _register_commands() -> None:
    """Import the command modules under specbench/commands (each registers itself on `app`)."""
    import importlib
    import importlib.util

    from specbench.commands import COMMAND_MODULES

    for name in COMMAND_MODULES:
        if importlib.util.find_spec(f"specbench.commands.{name}") is not None:
            importlib.import_module(f"specbench.commands.{name}")
    for info in app.registered_commands:  # the shared option checks, for every command
        info.cls = info.cls if info.cls not in (None, TyperCommand) else _Command
        info.epilog = info.epilog or EXIT_CODES_HELP


_register_commands()
