"""Reading a results.json back: the one reader every command uses (compare's sides, accept's
--timings, predict-check), so each checks the schema version and the fields the same way and
says what is wrong in one line — the field and the value, never pydantic's multi-line dump.

    results = read_results_file(Path("reports/tiny/results.json"), "--timings")
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from specbench.analysis.documents.results_model import RunResults
from specbench.errors import SpecbenchError

RESULTS_SCHEMA = 3  # the version RunResults reads (results_model.py's history)
OLDEST_READ = 2  # schema 2 reads with its renamed keys mapped (`results_history`)


def _regenerate(path: Path) -> str:
    return f"regenerate the results.json with `specbench report {path.parent}`"


def validation_message(err: ValidationError) -> str:
    """The first error of a pydantic validation as "field 'a.0.b': what (got X)"."""
    first = err.errors()[0]
    field = ".".join(str(p) for p in first["loc"])
    msg = str(first["msg"]).removeprefix("Value error, ")
    got = " ".join(repr(first.get("input"))[:60].split())
    return f"field '{field}': {msg} (got {got})" if field else msg


def check_version(doc: Any, path: Path, who: str = "", required: bool = True) -> None:
    """The schema version of a results.json object: older than OLDEST_READ → regenerate, newer →
    upgrade.
    `required=False` lets a document without one pass (predict-check reads hand-made subsets)."""
    where = f"{who}: {path}" if who else str(path)
    if not isinstance(doc, dict):
        raise SpecbenchError(f"{where} is not a specbench results.json (not a JSON object)")
    if "schema" not in doc:
        if not required:
            return
        raise SpecbenchError(f"{where} is not a specbench results.json (no schema version)")
    version = doc["schema"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise SpecbenchError(f"{where}: schema version {version!r} is not a number")
    if version > RESULTS_SCHEMA:
        raise SpecbenchError(
            f"{where} has results schema {version}, newer than this specbench reads "
            f"({RESULTS_SCHEMA}); upgrade specbench"
        )
    if version < OLDEST_READ:
        raise SpecbenchError(
            f"{where} has results schema {version}, older than this specbench reads "
            f"({OLDEST_READ}–{RESULTS_SCHEMA}); {_regenerate(path)}"
        )


def check_results(doc: Any, path: Path, who: str = "") -> RunResults:
    """The typed document of a results.json object read from `path`: its schema version first
    (too old: regenerate; newer: upgrade), then every field; an older readable version's renamed
    keys are mapped to the current names (`results_history`)."""
    where = f"{who}: {path}" if who else str(path)
    check_version(doc, path, who)
    try:
        current = {**doc, "schema": RESULTS_SCHEMA}
        return RunResults.model_validate(current, context={"schema": doc["schema"]})
    except ValidationError as err:
        raise SpecbenchError(
            f"{where}: {validation_message(err)}; not a valid specbench results.json ({_regenerate(path)})"
        ) from None


def read_json(path: Path, who: str = "") -> Any:
    """The JSON of the file at `path` (one line when missing, not UTF-8 or not JSON)."""
    where = f"{who}: {path}" if who else str(path)
    if not path.is_file():
        raise SpecbenchError(f"{where} not found; give a run directory or its results.json")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise SpecbenchError(f"{where} is not valid JSON; give a results.json") from None


def read_results_file(path: Path, who: str = "") -> RunResults:
    """The typed results.json at `path`; `who` names the option or argument in errors (e.g.
    "--timings")."""
    return check_results(read_json(path, who), path, who)


class _Open(BaseModel):
    """A part of results.json accept reads a few fields of: the rest is kept, not required."""

    model_config = ConfigDict(extra="allow")


class _Mean(_Open):
    mean: float | None = None


class _VerifyFit(_Open):
    t0_ms: float | None = None
    t1_ms_per_token: float | None = None


class _OverheadFit(_Open):
    o0_ms: float | None = None
    o1_ms_per_token: float | None = None


class _EngineRoundFit(_Open):
    r0_ms: float | None = None
    r1_ms_per_token: float | None = None


class TimingFields(_Open):
    """A workload's `timing` as `analysis.rollout.timing.time_model_from_results` reads it: the
    transformers runner's draft step and verify / overhead fits, or an engine run's round fit
    (a field a run did not write is None: that entry's timing is incomplete)."""

    t_draft_ms: _Mean | None = None
    verify_fit: _VerifyFit | None = None
    overhead_fit: _OverheadFit | None = None
    engine_round_fit: _EngineRoundFit | None = None


class TimingWorkload(_Open):
    workload: str
    temperature: float | None = None
    baseline_step_ms: float | None = None
    timing: TimingFields | None = None


class _TimingRun(_Open):
    target: str | None = None
    draft: str | None = None


class _TimingEnv(_Open):
    tokenizers: dict[str, str | None] | None = None  # absent before fingerprints were recorded


class TimingSource(BaseModel):
    """What `accept --timings` reads of a results.json: the pair, its tokenizer fingerprints and
    each workload's timing fields (typed; the rest of the document is not needed, so not
    required)."""

    model_config = ConfigDict(extra="allow")
    run: _TimingRun = _TimingRun()
    env: _TimingEnv = _TimingEnv()
    workloads: list[TimingWorkload]


def read_timing_source(path: Path, who: str = "--timings") -> TimingSource:
    """The typed timing part of the results.json at `path`: schema version, then the fields
    accept reads, each error one line naming the field."""
    doc = read_json(path, who)
    check_version(doc, path, who)
    try:
        return TimingSource.model_validate(doc)
    except ValidationError as err:
        raise SpecbenchError(
            f"{who}: {path}: {validation_message(err)}; not a valid specbench results.json "
            f"({_regenerate(path)})"
        ) from None
