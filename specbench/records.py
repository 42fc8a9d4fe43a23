"""Run records: one self-describing JSON line per generated prompt, appended as soon as it exists.

Every line carries the schema version, its kind ("baseline", "spec", "warmup_baseline",
"warmup_spec", "failed") and its unit key (workload, temperature, γ, drafter, policy, prompt id,
repeat). A record is never rewritten: `--resume` reads the file, skips the complete units and
appends the rest; derived files (results.json, reports) are regenerated from the records.

Schema history:
  1 — first version (per-prompt lines holding per-round arrays).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specbench.errors import SpecbenchError, SpecbenchWarning

SCHEMA_VERSION = 1
RECORDS_FILE = "records.jsonl"


@dataclass(frozen=True)
class UnitKey:
    """What makes a record unique within a run."""

    kind: str  # "baseline" | "spec" (warm-ups and failures map to the kind they stand for)
    workload: str
    temperature: float
    gamma: int  # 0 for the baseline
    drafter: str
    policy: str
    prompt_id: str
    repeat: int

    @classmethod
    def of(cls, rec: dict[str, Any]) -> UnitKey:
        return cls(
            kind=rec["unit_kind"],
            workload=rec["workload"],
            temperature=float(rec["temperature"]),
            gamma=int(rec["gamma"]),
            drafter=rec.get("drafter", ""),
            policy=rec.get("policy", ""),
            prompt_id=rec["prompt_id"],
            repeat=int(rec.get("repeat", 0)),
        )


class RecordWriter:
    """Appends JSON lines and flushes each to disk (a killed run loses at most the line in flight)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fh = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._fh.write(json.dumps({"schema": SCHEMA_VERSION, **record}) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Rounds(BaseModel):
    """Per-round arrays of a transformers-backend spec record (what the analyses index)."""

    model_config = ConfigDict(extra="allow")
    gamma: list[int] | None = None
    drafted: list[int] | None = None
    accepted: list[int] | None = None
    emitted: list[int] | None = None
    beta: list[list[float]] | None = None
    draft_top_prob: list[list[float]] | None = None
    draft_ms: list[list[float]] | None = None
    verify_ms: list[float] | None = None
    overhead_ms: list[float] | None = None


class _UnitRecord(BaseModel):
    """The fields every prompt record (baseline, spec, failed, warm-up) is read by: typed here so
    that a damaged line is one error naming the line and the field, not a crash in the analysis."""

    model_config = ConfigDict(extra="allow")
    kind: str
    unit_kind: Literal["baseline", "spec"]
    workload: str
    temperature: float = Field(ge=0.0, allow_inf_nan=False)
    gamma: int = Field(ge=0)
    prompt_id: str
    drafter: str = ""
    policy: str = ""
    repeat: int = Field(default=0, ge=0)
    status: str = "ok"
    new_tokens: int | None = None
    wall_ms: float | None = None
    decode_ms: float | None = None
    tokens_per_s: float | None = None
    tpot_ms: float | None = None
    peak_memory_mb: float | None = None
    ttft_ms: list[float] | None = None
    step_ms: list[float] | None = None
    forward_ms: list[float] | None = None
    rounds: _Rounds | None = None


UNIT_KINDS = frozenset({"baseline", "spec", "failed", "warmup_baseline", "warmup_spec"})


def check_record(rec: Any) -> None:
    """Raise ValueError (one line: the field and what is wrong) if `rec` is not a usable record."""
    if not isinstance(rec, dict):
        raise ValueError(f"a record is a JSON object, got {type(rec).__name__}")
    schema = rec.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise ValueError("it has no schema version; not a specbench record")
    if schema > SCHEMA_VERSION:
        raise ValueError(
            f"it has schema version {schema}, newer than this specbench understands "
            f"({SCHEMA_VERSION}); upgrade specbench"
        )
    kind = rec.get("kind")
    if not isinstance(kind, str):
        raise ValueError(f"field 'kind': a record kind (text) is required, got {kind!r}")
    if kind in UNIT_KINDS:
        try:
            _UnitRecord.model_validate(rec)
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            got = " ".join(repr(first.get("input"))[:60].split())
            raise ValueError(f"field '{field}': {first['msg']} (got {got})") from None


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Yield the records of a file. A truncated last line (a killed run) is skipped with a
    SpecbenchWarning; a malformed line elsewhere (not UTF-8, not JSON, a field of the wrong type)
    or a newer schema is a SpecbenchError naming the line and the field."""
    if not path.is_file():
        raise SpecbenchError(f"no records found: {path} does not exist")
    lines = path.read_bytes().split(b"\n")  # the writer ends each record with \n, only
    if lines and not lines[-1]:
        lines.pop()
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise SpecbenchError(f"{path}: line {lineno} is not UTF-8 text") from None
        except (json.JSONDecodeError, RecursionError):
            if lineno == len(lines):
                warnings.warn(
                    f"{path}: line {lineno} is truncated (interrupted run); using the complete lines",
                    SpecbenchWarning,
                    stacklevel=2,
                )
                return
            raise SpecbenchError(f"{path}: line {lineno} is not valid JSON") from None
        try:
            check_record(rec)
        except ValueError as exc:
            raise SpecbenchError(f"{path}: line {lineno}: {exc}") from None
        yield rec


def unit_of(rec: dict[str, Any]) -> tuple[UnitKey, int | None]:
    """A measured unit's identity: its UnitKey, plus the concurrency on the engine backends (which
    measure the same prompt once per concurrency level); None for the transformers backend."""
    conc = rec.get("concurrency")
    return UnitKey.of(rec), (int(conc) if conc is not None else None)


MEASURED_KINDS = ("baseline", "spec")


def unresolved_failures(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last failed record of each unit that has no successful record in the file.

    `--resume` retries failed units and appends their new records (a record is never rewritten),
    so a failure followed by a success is history, not a failure of the run.
    """
    ok = {unit_of(r) for r in records if r.get("kind") in MEASURED_KINDS}
    last: dict[tuple[UnitKey, int | None], dict[str, Any]] = {}
    for rec in records:
        if rec.get("kind") == "failed" and (unit := unit_of(rec)) not in ok:
            last.pop(unit, None)  # keep file order of the latest failure
            last[unit] = rec
    return list(last.values())


def read_records(path: Path) -> list[dict[str, Any]]:
    return list(iter_records(path))


def repair_truncated_tail(path: Path) -> None:
    """Cut a partial last line left by a killed run, so appended records start on a fresh line."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with path.open("r+b") as fh:
            fh.truncate(cut)
