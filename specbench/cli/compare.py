"""`specbench compare BASE NEW`: did acceptance, speedup or the speculation verdict regress?

    specbench compare reports/main reports/pr --strict             # two run directories
    specbench compare main1 main2 main3 vs pr1 pr2 pr3             # several runs per side
    specbench compare reports/old-driver reports/new-driver --subject env
    specbench compare baseline/results.json reports/pr --markdown comment.md --junit junit.xml

BASE and NEW are run directories (records.jsonl: per-prompt tests) or results.json files (stored
CIs, normal approximation); several run directories per side are separated by the word `vs`.
A regression is significant after Holm's adjustment over every tested row AND beyond a minimum
effect (docs/compare.md). Acceptance and speedup are gated; absolute latency and tokens/s are
informational unless several runs per side are given or `--subject env` declares the environment
change (engine, driver, hardware) the thing under test. Runs of different schema versions, models
or sampling settings are refused unless --force. Failed records and settings missing from NEW are
always listed; `--strict` makes them fail the comparison.

Exit codes: 0 no regression, 1 at least one regression (or, with --strict, failed/missing rows),
2 bad input (missing or unreadable run, incomparable runs without --force, a bad thresholds file or
option).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.console import Console

from specbench.cli.options import JsonOption
from specbench.errors import SpecbenchError, malformed_file

if TYPE_CHECKING:
    from specbench.analysis.compare.metrics import Thresholds
    from specbench.analysis.compare.sides import Side


def load_side(path: Path) -> Side:
    """A run directory (records, recomputed results) or a results.json file."""
    from specbench.analysis.compare.sides import side_from_records, side_from_results
    from specbench.analysis.load_cells import closed_loop
    from specbench.analysis.results import build_results
    from specbench.analysis.results_read import read_results_file
    from specbench.harness.rundir import load_run
    from specbench.records import RECORDS_FILE

    if path.is_dir():
        if (path / RECORDS_FILE).is_file():
            records, config, env, _ = load_run(path)
            results = build_results(records, config, env)
            side = side_from_records(closed_loop(records), config, env, str(path), results)
            if not side.groups:
                raise SpecbenchError(f"{path} has no complete baseline records; nothing to compare")
            return side
        if not (path / "results.json").is_file():
            raise SpecbenchError(
                f"{path} holds neither {RECORDS_FILE} nor results.json; give a run directory "
                "written by `specbench run` or a results.json"
            )
        path = path / "results.json"
    _, typed = read_results_file(path)  # schema version and fields checked, one line
    try:
        return side_from_results(typed, str(path))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise malformed_file(path, exc, "specbench results.json") from None


def split_sides(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """BASE NEW, or BASE… vs NEW… (several runs per side)."""
    words = [str(p) for p in paths]
    if "vs" in words:
        i = words.index("vs")
        base, new = paths[:i], paths[i + 1 :]
        if not base or not new or "vs" in words[i + 1 :]:
            raise SpecbenchError(
                "give runs as BASE NEW or BASE… vs NEW… (one `vs`, at least one run on each side)"
            )
        return base, new
    if len(paths) != 2:
        raise SpecbenchError(
            f"got {len(paths)} runs; give BASE NEW, or several per side as BASE… vs NEW…"
        )
    return paths[:1], paths[1:]


def load_many(paths: list[Path], which: str) -> Side:
    """One side from one run, or several runs of the same config merged (runs as the unit)."""
    from specbench.analysis.compare.environment import identity_differences
    from specbench.analysis.compare.sides import merge_runs

    sides = [load_side(p) for p in paths]
    if len(sides) == 1:
        return sides[0]
    if not all(s.has_records for s in sides):
        raise SpecbenchError(
            f"several {which} runs must each be a run directory with records.jsonl, "
            "not a results.json"
        )
    for s in sides[1:]:
        if diffs := identity_differences(sides[0], s):
            what = "; ".join(f"{d.field}: {d.base} vs {d.new}" for d in diffs)
            raise SpecbenchError(
                f"the {which} runs {sides[0].label} and {s.label} measured different things "
                f"({what}); the runs of one side must share models and settings"
            )
    return merge_runs(sides)


def load_thresholds(path: Path | None, overrides: dict[str, Any]) -> Thresholds:
    """Defaults < YAML file < flags."""
    import yaml
    from pydantic import ValidationError

    from specbench.analysis.compare.metrics import Thresholds

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


def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="BASE NEW (run directories or results.json), or several runs per side: "
            "BASE… vs NEW…",
            show_default=False,
        ),
    ],
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
            help="Kept for old scripts; no effect (a run's unstable-timing flag no longer blocks "
            "rows: the run-to-run term is in the test).",
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Failed records, or settings in BASE missing from NEW, fail the comparison "
            "(exit 1). They are listed either way.",
        ),
    ] = False,
    subject: Annotated[
        Literal["code", "env"],
        typer.Option(
            "--subject",
            help="What the comparison is about: 'code' (default; absolute timing informational "
            "with one run per side) or 'env' (an engine, driver or hardware change: absolute "
            "timing gated across it).",
        ),
    ] = "code",
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Also write a Markdown PR comment here.")
    ] = None,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write a JUnit XML report here.")
    ] = None,
    show_unchanged: Annotated[
        bool, typer.Option("--show-unchanged", help="List unchanged rows instead of collapsing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Compare two runs (or two sets of runs); exit 1 on a significant regression beyond the
    minimum effect (Holm-adjusted over every tested row; see docs/compare.md).

    Exit codes: 0 no regression, 1 at least one regression (or, with --strict, failed or missing
    rows), 2 bad input (or incomparable runs without --force).
    """
    from specbench.analysis.compare.environment import identity_differences
    from specbench.analysis.compare.verdict import compare as compare_sides
    from specbench.report import compare as render

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
    base_paths, new_paths = split_sides(runs)
    b_side, n_side = load_many(base_paths, "base"), load_many(new_paths, "new")
    diffs = identity_differences(b_side, n_side)
    if diffs and not force:
        what = "; ".join(f"{d.field}: {d.base} vs {d.new}" for d in diffs)
        raise SpecbenchError(
            f"the runs are not comparable ({what}); pass --force to compare anyway"
        )
    result = compare_sides(
        b_side,
        n_side,
        th,
        forced=diffs,
        gate_unstable_timing=gate_unstable_timing,
        strict=strict,
        subject=subject,
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
