"""The `specbench` typer app: the command list, error handling and the console-script entry.

Each command lives in its own module (cli/estimate/roi.py, cli/run.py, …): it parses its options, calls
one core function and hands the result to `report/`. This module registers them (`COMMANDS`,
in the order `--help` lists them) and makes every exit code mean one thing
(cli/exit_codes.py): a SpecbenchError is one `error:` line and exit code 2, a usage error too,
an unexpected exception exit code 3 with its traceback in a log file, Ctrl-C 130.

    specbench roi --alpha 0.6
    specbench roi --alpha 0.6 --t-target 80 --t-draft 7 --json
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer
from typer import _click as click  # typer >= 0.25 vendors click: its classes are these
from typer.core import TyperGroup

import specbench.cli.faults as faults
from specbench.cli.check.compare import compare
from specbench.cli.check.predict_check import predict_check
from specbench.cli.check.verify import verify
from specbench.cli.estimate.roi import roi
from specbench.cli.estimate.simulate import simulate
from specbench.cli.exit_codes import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_CODES_HELP,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    one_line,
)
from specbench.cli.options import CheckedCommand
from specbench.cli.report import report
from specbench.cli.rollout.accept import accept
from specbench.cli.rollout.canary import canary
from specbench.cli.rollout.schedule import schedule
from specbench.cli.run import run
from specbench.cli.schema import schema
from specbench.cli.validate import validate
from specbench.errors import SpecbenchError, SpecbenchWarning

# Every command, in the order `specbench --help` lists them.
COMMANDS: tuple[Callable[..., None], ...] = (
    roi,
    run,
    report,
    accept,
    compare,
    verify,
    canary,
    simulate,
    schedule,
    validate,
    schema,
    predict_check,
)


def _internal_error(exc: BaseException) -> tuple[str, int]:
    """The `error:` line and exit code of an unexpected exception: an environment fault (a full
    disk, a read-only directory) is the user's to fix (2, or 4 mid-run: cli/faults.py); anything
    else is a bug (3, its traceback in a crash log)."""
    if isinstance(exc, OSError):
        fault = faults.fault_exit(exc)
        if fault is not None:
            return f"error: {one_line(fault[0])}", fault[1]
    return (
        f"error: internal error ({type(exc).__name__}); the traceback is in {faults.crash_log(exc)} — "
        "please report it",
        EXIT_INTERNAL,
    )


def _usage_error(exc: click.exceptions.ClickException) -> str:
    # typer reports a value out of an option's range through pydantic: drop its "Value error, "
    return f"error: {one_line(exc.format_message().replace('Value error, ', ''))}"


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Warnings in specbench's own voice, one line each; third-party warnings (transformers,
    torch, matplotlib while loading or plotting) are dropped: they are not the user's to act on.
    So are ResourceWarnings, which name the frame an object was collected in, not its owner (an
    engine's zmq context closed late by vLLM surfaced as specbench's own)."""
    if issubclass(category, ResourceWarning):
        return
    if not issubclass(category, SpecbenchWarning) and f"{os.sep}specbench{os.sep}" not in filename:
        return
    typer.echo(f"warning: {one_line(str(message))}", err=True)


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
    """Every command runs through here: a SpecbenchError or a bad option value becomes one line
    and exit code 2, an unexpected exception exit code 3 with its traceback in a log file (never
    1, the verdict code)."""

    def invoke(self, ctx: click.Context) -> Any:
        quiet_third_party()
        faults.reset()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("default")
                warnings.showwarning = _show_warning
                return super().invoke(ctx)
        except SpecbenchError as exc:
            typer.echo(f"error: {one_line(str(exc))}", err=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except click.exceptions.ClickException as exc:  # a command's option out of range
            typer.echo(_usage_error(exc), err=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except (typer.Exit, typer.Abort):
            raise
        except BrokenPipeError:  # `specbench … | head`: not a fault; run_cli answers it (141)
            raise
        except Exception as exc:  # a bug (or the environment's fault): one line, its code
            line, code = _internal_error(exc)
            typer.echo(line, err=True)
            raise typer.Exit(code) from None
        finally:  # --plain is this invocation's, not the process's (tests invoke many in one)
            from specbench.report.render.terminal import set_plain

            set_plain(False)


app = typer.Typer(
    name="specbench",
    help="Does speculative decoding pay for your model pair, hardware and traffic, and with which γ?",
    epilog=EXIT_CODES_HELP,
    cls=_Group,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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
            help="Plain output for CI logs: ASCII only (γ as gamma), no colour, no progress "
            "bars (also SPECBENCH_PLAIN=1; NO_COLOR or TERM=dumb drop colour only).",
        ),
    ] = False,
) -> None:
    """Does speculative decoding pay for your model pair, hardware and traffic, and with which γ?"""
    from specbench.report.render.terminal import set_plain

    set_plain(plain)


for _command in COMMANDS:  # the shared option checks and the exit codes, for every command
    _name = _command.__name__.replace("_", "-")  # predict_check → predict-check
    app.command(_name, cls=CheckedCommand, epilog=EXIT_CODES_HELP)(_command)


@functools.cache
def _click_command() -> Any:
    """The click group typer builds from `app` (built once: typer rebuilds it on every call)."""
    return typer.main.get_command(app)


def run_cli(args: Sequence[str]) -> int:
    """Run the CLI on `args`; return the exit code (cli/exit_codes.py)."""
    try:
        rv = _click_command().main(
            args=list(args) or ["--help"], prog_name="specbench", standalone_mode=False
        )
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        return EXIT_INTERRUPTED
    except typer.Exit as exc:
        return int(exc.exit_code)
    except SystemExit as exc:  # a closed pipe (`specbench … | head`): rich's and typer's own
        # answer is exit 1, our verdict code — rich raises it while handling the BrokenPipeError,
        # typer (every other write) after wrapping stdout in click's PacifyFlushWrapper
        if isinstance(exc.__context__, BrokenPipeError) or isinstance(
            sys.stdout, click.utils.PacifyFlushWrapper
        ):
            _drop_stdout()
            return EXIT_BROKEN_PIPE
        raise
    except click.exceptions.ClickException as exc:  # usage: an unknown command or option
        typer.echo(_usage_error(exc), err=True)
        return EXIT_BAD_INPUT
    except SpecbenchError as exc:  # raised while parsing (e.g. an option's shared checks)
        typer.echo(f"error: {one_line(str(exc))}", err=True)
        return EXIT_BAD_INPUT
    except Exception as exc:
        line, code = _internal_error(exc)
        typer.echo(line, err=True)
        return code
    return rv if isinstance(rv, int) else EXIT_OK


def _drop_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's flush at exit does not raise
    a second BrokenPipeError (the recipe of Python's `signal` documentation, "Note on SIGPIPE")."""

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor behind stdout (a test's capture)
        pass


def main() -> None:
    """Console-script entry."""
    sys.exit(run_cli(sys.argv[1:]))
