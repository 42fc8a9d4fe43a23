"""What `specbench compare` reads: a side (a run directory or a results.json), several runs of
one side, and the thresholds file (defaults < file < flags)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.analysis.documents.results_model import RunEnv
from specbench.errors import SpecbenchError, malformed_file

if TYPE_CHECKING:
    from specbench.analysis.compare.metrics import Thresholds
    from specbench.analysis.compare.sides import Side


def load_side(path: Path) -> Side:
    """A run directory (records, recomputed results) or a results.json file."""
    from specbench.analysis.compare.sides import side_from_records, side_from_results
    from specbench.analysis.documents.results_read import read_results_file
    from specbench.analysis.pipeline.results import build_results
    from specbench.analysis.serving.load_cells import closed_loop
    from specbench.harness.run.rundir import load_run
    from specbench.records import RECORDS_FILE

    if path.is_dir():
        if (path / RECORDS_FILE).is_file():
            records, config, env, _ = load_run(path)
            results = build_results(records, config, RunEnv.model_validate(env))
            side = side_from_records(closed_loop(records), config, results.env, str(path), results)
            if not side.groups:
                raise SpecbenchError(f"{path} has no complete baseline records; nothing to compare")
            return side
        if not (path / "results.json").is_file():
            raise SpecbenchError(
                f"{path} holds neither {RECORDS_FILE} nor results.json; give a run directory "
                "written by `specbench run` or a results.json"
            )
        path = path / "results.json"
    typed = read_results_file(path)  # schema version and fields checked, one line
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
    if isinstance(data.get("gate"), str):  # --gate alpha,speedup_recommended
        data["gate"] = [g.strip() for g in data["gate"].split(",") if g.strip()]
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
