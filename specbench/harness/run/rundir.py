"""A run directory's files: read records.jsonl, config.yaml and env.json back (checked, one-line
errors), and write results.json from them (analysis), returned as the typed `RunResults`.

`specbench report DIR` and the end of `specbench run` both call `cli.report.write_reports`, which
calls `write_results` here and then has report/ render summary.csv and the documents from the
typed results (`report.run.documents.write_run_files`): the harness never imports report/. Nothing
here loads a model or imports torch; all numbers come from `analysis.pipeline.results`.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from specbench.analysis.documents.results_model import RunEnv, RunResults
from specbench.analysis.documents.results_model_batch import PredictionCheck
from specbench.analysis.estimators.latency import LatencyDistribution, latency_distributions
from specbench.analysis.pipeline.results import build_results
from specbench.analysis.serving.load_cells import closed_loop
from specbench.config.stored import StoredConfig, StoredEconomics
from specbench.errors import SpecbenchError
from specbench.record_line import RecordLine
from specbench.records import BATCH_TIMING_FILE, RECORDS_FILE, read_records


def load_run(
    run_dir: Path,
) -> tuple[list[RecordLine], StoredConfig, dict[str, Any], list[str]]:
    """Records, stored config and env of a run directory, plus warnings met while reading."""
    if not run_dir.is_dir():
        raise SpecbenchError(f"run directory not found: {run_dir}")
    rec_path = run_dir / RECORDS_FILE
    if not rec_path.is_file():
        raise SpecbenchError(f"{run_dir} has no {RECORDS_FILE}; is it a specbench run directory?")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = read_records(rec_path)
    if not records:
        raise SpecbenchError(f"{rec_path} holds no complete record")
    config = read_stored_config(run_dir / "config.yaml")
    env = read_env(run_dir / "env.json")
    return records, config, env, [str(w.message) for w in caught]


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecbenchError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise SpecbenchError(f"{path}: cannot read: {exc.strerror}") from None


def read_stored_config(path: Path) -> StoredConfig:
    """A run's stored config.yaml as the typed `StoredConfig` the analyses take (one line naming
    the file and the key when a key it reads is unusable); a missing file is an empty config."""

    if not path.is_file():
        return StoredConfig()
    try:
        data = yaml.safe_load(_text(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecbenchError(f"{path}: invalid YAML{where}") from None
    if data is None:
        return StoredConfig()
    if not isinstance(data, dict):
        raise SpecbenchError(f"{path}: the stored config must be a mapping of keys to values")
    try:
        return StoredConfig.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        got = " ".join(repr(first.get("input"))[:60].split())
        raise SpecbenchError(f"{path}: {key}: {first['msg']} (got {got})") from None


def read_env(path: Path) -> dict[str, Any]:
    """A run's env.json: a JSON object of text / number fields; a missing file is empty."""
    if not path.is_file():
        return {}
    try:
        env = json.loads(_text(path))
    except json.JSONDecodeError as exc:
        raise SpecbenchError(f"{path}: not valid JSON (line {exc.lineno})") from None
    if not isinstance(env, dict):
        raise SpecbenchError(f"{path}: env.json must be a JSON object")
    for key, value in env.items():
        if isinstance(value, dict | list):
            continue  # structured extras (e.g. engine versions) are passed through
        if value is not None and not isinstance(value, str | int | float):
            raise SpecbenchError(f"{path}: field '{key}' has an unusable value {value!r}")
    return env


def read_results(run_dir: Path) -> dict[str, Any]:
    """A run directory's results.json, as written (one-line error when absent or unreadable)."""
    path = run_dir / "results.json"
    if not path.is_file():
        raise SpecbenchError(f"{run_dir} has no results.json; run `specbench report {run_dir}`")
    from specbench.analysis.documents.results_read import check_version, read_json

    doc = read_json(path)
    check_version(doc, path, required=False)  # another version: regenerate or upgrade
    return dict(doc)


def prediction_check_of(engine: dict[str, Any], reference_dir: Path) -> PredictionCheck | None:
    """An engine run's results against a transformers run's batch-size prediction; None when
    the reference has no results.json or no prediction."""
    from specbench.analysis.estimators.prediction_check import check_prediction

    try:
        reference = read_results(reference_dir)
    except SpecbenchError:
        return None
    return check_prediction(engine, reference, str(reference_dir))


def write_results(
    run_dir: Path, economics: dict[str, Any] | None = None
) -> tuple[RunResults, dict[tuple[str, float], LatencyDistribution], list[str]]:
    """Write results.json; return it typed (as the pipeline built it), each workload ×
    temperature's per-request latency the documents plot, and warnings met while reading. `economics` ({gpu_hour_usd, gpus}; None
    values ignored) overrides the stored config's."""
    records, config, env, notes = load_run(run_dir)
    given = {k: v for k, v in (economics or {}).items() if v is not None}
    if given:
        stored = config.economics.model_dump(exclude_unset=True) if config.economics else {}
        econ = StoredEconomics.model_validate({**stored, **given})
        config = config.model_copy(update={"economics": econ})
    timing_path = run_dir / BATCH_TIMING_FILE  # transformers runs with batch_timing (§18)
    timing = read_records(timing_path) if timing_path.is_file() else None
    results = build_results(records, config, RunEnv.model_validate(env), timing)
    reference = config.conformance.reference_run if config.conformance else None
    if reference:  # engine runs
        from specbench.analysis.conformance.reference_check import check_against_reference

        results.conformance = check_against_reference(closed_loop(records), config, load_run)
        predicted = prediction_check_of(
            results.model_dump(mode="json", by_alias=True, exclude_unset=True), Path(reference)
        )
        if predicted is not None:  # the reference's batch-size prediction (docs/theory.md §18)
            results.prediction_check = predicted
    if not results.workloads:
        raise SpecbenchError(f"{run_dir} has no complete baseline records yet; nothing to report")
    (run_dir / "results.json").write_text(results.json_text())
    # open-loop cells: results only, not plotted
    return results, latency_distributions(results, closed_loop(records)), notes
