"""Options shared by several commands, declared once, and the checks every option gets.

Ranges are declared on the option (`typer.Option(min=..., max=...)`, `Literal` choices), so
`--help` shows them and a value out of range is one `error:` line with exit code 2 before the
command body runs. `CheckedCommand` adds what typer does not check: floats are finite (`nan` and
`inf` parse as floats, and no option means them) and output paths are usable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import typer
from typer import _click as click  # typer >= 0.25 vendors click: its classes are these
from typer.core import TyperCommand

import specbench.cli.faults as faults
from specbench import defaults
from specbench.config import MAX_PROMPTS
from specbench.errors import SpecbenchError

MAX_TOP_K = 1_000_000  # beyond any vocabulary: top-k then keeps every token
DEFAULT_COST_RATIO = defaults.COST_RATIO  # T_d / T_ar assumed by roi and accept without timing

# Options that name a file to write: its missing parent directories are created, and a path
# that is a directory (or under a file) is refused before the command starts.
OUTPUT_FILE_PARAMS = frozenset(
    {"csv_path", "plot_path", "markdown", "junit", "out_file", "export_rules"}
)
OUTPUT_DIR_PARAMS = frozenset({"report_dir"})


# --- options shared by several commands ----------------------------------------------------

# Pricing options of `run` and `report` (one declaration, one help text).
GpuHourUsdOption = Annotated[
    float | None,
    typer.Option("--gpu-hour-usd", help="Price of one GPU-hour (USD), for cost per 10⁶ tokens."),
]
GpusOption = Annotated[
    int | None,
    typer.Option("--gpus", min=1, max=100_000, help="GPUs serving the target (default 1)."),
]
ConfigArgument = Annotated[
    Path, typer.Argument(help="Run configuration (YAML), e.g. configs/tiny.yaml.")
]
MaxPromptsOption = Annotated[
    int | None,
    typer.Option("--max-prompts", min=1, max=MAX_PROMPTS, help="At most N prompts per workload."),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")
]

# The model pair on the command line (accept; run and verify read it from their config).
TargetOption = Annotated[
    str | None, typer.Option("--target", help="Target model (hub id or directory).")
]
DraftOption = Annotated[
    str | None, typer.Option("--draft", help="Draft model (hub id or directory).")
]
DeviceOption = Annotated[str | None, typer.Option("--device", help="cpu, cuda, cuda:1 or auto.")]
DtypeOption = Annotated[
    Literal["auto", "float32", "float16", "bfloat16"] | None,
    typer.Option("--dtype", help="auto, float32, float16 or bfloat16."),
]
TopKOption = Annotated[
    int | None, typer.Option("--top-k", min=0, max=MAX_TOP_K, help="Top-k (0 = off).")
]
# --temperature and --top-p are declared per command on purpose: accept and verify take them
# repeatable with their own fallbacks (accept: the config's, else 1), run takes no --top-p, and
# verify takes one --top-p; one alias would state a wrong default in some command's --help.

# Timing given by hand (roi, accept): one measured pair of per-token latencies. --cost-ratio is
# declared per command: in roi the results are then relative to T_ar, which the help says.
TTargetOption = Annotated[
    float | None, typer.Option("--t-target", help="Baseline per-token latency T_ar in ms.")
]
TDraftOption = Annotated[float | None, typer.Option("--t-draft", help="One draft step T_d in ms.")]


def csv_list(value: str | None) -> list[str] | None:
    """'code, chat' → ['code', 'chat']; None stays None (the option was not given)."""
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


# --- output paths -------------------------------------------------------------------------


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


# --- the checks every option of every command gets -----------------------------------------


def option_name(param: click.Parameter) -> str:
    """'--alpha' for an option, 'CONFIG' for an argument: how the user typed or reads it."""
    opts = [o for o in getattr(param, "opts", None) or [] if str(o).startswith("--")]
    return str(opts[0]) if opts else str(param.name or "?").upper()


def typed_values(param: click.Parameter, args: Sequence[str]) -> list[str]:
    """The values given on the command line to `param` (`--x V` and `--x=V` forms)."""
    opts = set(getattr(param, "opts", None) or [])
    values = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if eq and name in opts:
            values.append(value)
        elif arg in opts and i + 1 < len(args):
            values.append(args[i + 1])
    return values


def _non_finite(text: str) -> bool:
    try:
        return not math.isfinite(float(text))
    except ValueError:
        return False


class CheckedCommand(TyperCommand):
    """Checks shared by every option of every command, before the command body runs: floats are
    finite (click's FLOAT parses 'nan' and 'inf', which no option means), output paths usable."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            rest = super().parse_args(ctx, list(args))
        except click.exceptions.BadParameter as exc:
            # A ranged option given nan or inf: say "finite", not which bound nan fails.
            if exc.param is not None:
                for text in typed_values(exc.param, args):
                    if _non_finite(text):
                        name = option_name(exc.param)
                        raise SpecbenchError(
                            f"{name} must be a finite number, got {text}"
                        ) from None
            raise
        for param in self.params:
            value = ctx.params.get(param.name or "")
            if value is None:
                continue
            name = option_name(param)
            for v in value if isinstance(value, list | tuple) else [value]:
                if isinstance(v, float) and not math.isfinite(v):
                    raise SpecbenchError(f"{name} must be a finite number, got {v}")
            if param.name in OUTPUT_FILE_PARAMS:
                check_output_file(Path(value), name)
                faults.writing(Path(value))
            elif param.name in OUTPUT_DIR_PARAMS:
                check_output_dir(Path(value), name)
                faults.writing(Path(value))
        return rest
