"""`specbench compare BASE NEW`: did acceptance, latency or the speculation verdict regress?

    specbench compare reports/main reports/pr                      # two run directories
    specbench compare baseline/results.json reports/pr --markdown comment.md --junit junit.xml
    specbench compare reports/main reports/pr --thresholds ci/thresholds.yaml --json

BASE and NEW are run directories (records.jsonl: per-prompt bootstrap tests) or results.json files
(stored CIs, normal approximation). A regression is significant AND beyond a minimum effect (see
analysis/compare.py); a verdict flip ON → OFF always counts. Runs of different schema versions,
models or sampling settings are refused unless --force; different hardware or software makes the
timing rows "not comparable" while acceptance is still compared; so does a run that flagged its own
timing as unstable (unless --gate-unstable-timing).

Exit codes: 0 no regression, 1 at least one regression, 2 bad input (missing or unreadable run,
incomparable runs without --force, a bad thresholds file or option).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from specbench.cli import app, user_errors
from specbench.errors import SpecbenchError, malformed_file

if TYPE_CHECKING:
    from specbench.analysis.compare import Side, Thresholds


def load_side(path: Path) -> Side:
    """A run directory (records, recomputed results) or a results.json file."""
    from specbench.analysis.compare import side_from_records, side_from_results
    from specbench.analysis.results import build_results
    from specbench.records import RECORDS_FILE
    from specbench.report.writer import load_run

    if path.is_dir():
        if (path / RECORDS_FILE).is_file():
            records, config, env, _ = load_run(path)
            results = build_results(records, config, env)
            side = side_from_records(records, config, env, str(path), results)
            if not side.groups:
                raise SpecbenchError(f"{path} has no complete baseline records; nothing to compare")
            return side
        if not (path / "results.json").is_file():
            raise SpecbenchError(
                f"{path} holds neither {RECORDS_FILE} nor results.json; give a run directory "
                "written by `specbench run` or a results.json"
            )
        path = path / "results.json"
    if not path.is_file():
        raise SpecbenchError(f"not found: {path}; give a run directory or a results.json")
    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise SpecbenchError(f"{path} is not valid JSON; give a results.json") from None
    if not isinstance(doc, dict) or "workloads" not in doc or "schema" not in doc:
        raise SpecbenchError(f"{path} is not a specbench results.json (no schema/workloads)")
    try:
        return side_from_results(doc, str(path))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise malformed_file(path, exc, "specbench results.json") from None


def load_thresholds(path: Path | None, overrides: dict[str, Any]) -> Thresholds:
    """Defaults < YAML file < flags."""
    import yaml
    from pydantic import ValidationError

    from specbench.analysis.compare import Thresholds

    data: dict[str, Any] = {}
    if path is not None:
        if not path.is_file():
            raise SpecbenchError(f"thresholds file not found: {path}")
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError):
            raise SpecbenchError(f"{path}: invalid YAML") from None
        if not isinstance(loaded, dict):
            raise SpecbenchError(f"{path}: the thresholds file must be a mapping of keys to values")
        data.update(loaded)
    data.update({k: v for k, v in overrides.items() if v is not None})
    for key, value in data.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise SpecbenchError(f"{path or 'thresholds'}: {key} must be a finite number")
    try:
        return Thresholds.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        where = str(path) if path is not None else "thresholds"
        if first["type"] == "extra_forbidden":
            valid = ", ".join(Thresholds.model_fields)
            raise SpecbenchError(f"{where}: unknown key '{key}'; valid keys: {valid}") from None
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise SpecbenchError(f"{where}: {key}: {msg} (got {first.get('input')!r})") from None


@app.command()
def compare(
    base: Annotated[Path, typer.Argument(help="Base run directory or results.json.")],
    new: Annotated[Path, typer.Argument(help="New run directory or results.json.")],
    thresholds: Annotated[
        Path | None,
        typer.Option("--thresholds", help="YAML file of significance and minimum effects."),
    ] = None,
    significance: Annotated[
        float | None, typer.Option("--significance", help="Two-sided level (default 0.05).")
    ] = None,
    alpha_drop: Annotated[
        float | None, typer.Option("--alpha-drop", help="Minimum α drop (absolute, default 0.02).")
    ] = None,
    accepted_length_drop: Annotated[
        float | None,
        typer.Option("--accepted-length-drop", help="Minimum relative τ drop (default 0.05)."),
    ] = None,
    speedup_drop: Annotated[
        float | None,
        typer.Option("--speedup-drop", help="Minimum relative speedup drop (default 0.05)."),
    ] = None,
    latency_rise: Annotated[
        float | None,
        typer.Option("--latency-rise", help="Minimum relative latency rise (default 0.05)."),
    ] = None,
    throughput_drop: Annotated[
        float | None,
        typer.Option("--throughput-drop", help="Minimum relative tokens/s drop (default 0.05)."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Compare runs of different models/settings anyway.")
    ] = False,
    gate_unstable_timing: Annotated[
        bool,
        typer.Option(
            "--gate-unstable-timing",
            help="Gate on timing rows even where a run flagged its timing as unstable.",
        ),
    ] = False,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Also write a Markdown PR comment here.")
    ] = None,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write a JUnit XML report here.")
    ] = None,
    show_unchanged: Annotated[
        bool, typer.Option("--show-unchanged", help="List unchanged rows instead of collapsing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")
    ] = False,
) -> None:
    """Compare two runs; exit 1 on a significant regression beyond the minimum effect.

    Exit codes: 0 no regression, 1 at least one regression, 2 bad input (or incomparable runs
    without --force).
    """
    from specbench.analysis.compare import compare as compare_sides
    from specbench.analysis.compare import identity_differences
    from specbench.report import compare as render

    with user_errors():
        th = load_thresholds(
            thresholds,
            {
                "significance": significance,
                "alpha_drop": alpha_drop,
                "accepted_length_drop": accepted_length_drop,
                "speedup_drop": speedup_drop,
                "latency_rise": latency_rise,
                "throughput_drop": throughput_drop,
            },
        )
        b_side, n_side = load_side(base), load_side(new)
        diffs = identity_differences(b_side, n_side)
        if diffs and not force:
            what = "; ".join(f"{d.field}: {d.base} vs {d.new}" for d in diffs)
            raise SpecbenchError(
                f"the runs are not comparable ({what}); pass --force to compare anyway"
            )
        result = compare_sides(
            b_side, n_side, th, forced=diffs, gate_unstable_timing=gate_unstable_timing
        )
        if not result.rows:
            raise SpecbenchError(
                "the runs share no workload × temperature; nothing to compare "
                f"(base has {sorted(b_side.groups)}, new has {sorted(n_side.groups)})"
            )
        if markdown is not None:
            markdown.write_text(render.to_markdown(result, show_unchanged))
        if junit is not None:
            junit.write_text(render.to_junit(result))
        if as_json:
            typer.echo(json.dumps(render.to_dict(result), indent=2))
        else:
            console = Console()
            render.render_console(console, result, show_unchanged)
            for path, what in ((markdown, "Markdown"), (junit, "JUnit XML")):
                if path is not None:
                    console.print(f"{what} written to {path}")
    raise typer.Exit(result.exit_code)
