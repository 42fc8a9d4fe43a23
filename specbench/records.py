"""Run records: one self-describing JSON line per generated prompt, appended as soon as it exists.

Every line carries the schema version, its kind ("baseline", "spec", "warmup_baseline",
"warmup_spec", "failed"; the engine backends add one "engine_metrics" line per batch, and the
transformers backend with `batch_timing` writes "batch_timing" lines, one per workload × batch
size × repeat, to batch_timing.jsonl beside records.jsonl) and its unit key (workload, temperature, γ, drafter, policy, prompt id, repeat). A record is never
rewritten: `--resume` reads the file, skips the complete units and appends the rest; derived
files (results.json, reports) are regenerated from the records.

Each kind is a pydantic model (`BaselineRecord`, `SpecRecord`, `WarmupRecord`, `FailedRecord`,
`EngineMetricsRecord`, `BatchTimingRecord`; unknown keys are kept): the reader validates every line against its
kind's model (`iter_records` yields the JSON objects as written, `read_typed_records` the
models), and `record_json_schema()` documents a line. The harness writes plain dicts, so the
lines are exactly what it wrote; the analysis reads them as `record_line.RecordLine` (typed keys).

Schema history:
  1 — first version (per-prompt lines holding per-round arrays).
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from specbench.errors import SpecbenchError, SpecbenchWarning
from specbench.record_line import RecordLine

SCHEMA_VERSION = 1
RECORDS_FILE = "records.jsonl"
BATCH_TIMING_FILE = "batch_timing.jsonl"  # the "batch_timing" lines (transformers backend)

WRITTEN: set[Path] = set()  # files appended to by this process: records to keep (cli/faults.py)


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
    def of(cls, rec: Mapping[str, Any]) -> UnitKey:
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
        try:
            self._fh.write(json.dumps({"schema": SCHEMA_VERSION, **record}) + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except OSError as exc:  # a full disk, the file-size limit: name the file (cli/faults.py)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
        WRITTEN.add(self.path)

    def close(self) -> None:
        with contextlib.suppress(OSError):  # a failed line's flush again: write raised already
            self._fh.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Rounds(BaseModel):
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


class Record(BaseModel):
    """Every line (the base of each kind's model; a kind this specbench does not know reads as
    this): the schema version and the kind. Unknown keys are kept (extra="allow"), so a
    record read and dumped again (`model_dump(by_alias=True, exclude_unset=True)`) is the line's
    object, key for key."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    schema_version: int = Field(alias="schema")
    kind: str


class UnitRecord(Record):
    """The fields every prompt record (measured, failed, warm-up) is read by: typed here so that
    a damaged line is one error naming the line and the field, not a crash in the analysis."""

    unit_kind: Literal["baseline", "spec"]
    workload: str
    temperature: float = Field(ge=0.0, allow_inf_nan=False)
    gamma: int = Field(ge=0)
    prompt_id: str
    drafter: str = ""
    policy: str = ""
    repeat: int = Field(default=0, ge=0)
    status: str = "ok"
    seed: int | None = None
    # the adaptive plan's step that produced the unit (pilot, backfill, measure); None = full grid
    plan_step: str | None = None
    plan_prompts: int | None = Field(default=None, ge=0)  # adaptive: the prompts its cell may use
    target_forwards: int | None = Field(default=None, ge=0)  # adaptive: the unit's target calls
    top_p: float | None = None
    top_k: int | None = None
    # engine backends (vllm / openai) only
    concurrency: int | None = Field(default=None, ge=1)
    backend: str | None = None
    endpoint: str | None = None
    # engine backends, open loop (`harness.serving.drive.open_driver`): the load point ("rate=2",
    # "trace"; absent = closed loop), its rate and the batch attempt the request belongs to
    load: str | None = None
    rate: float | None = None
    attempt: str | None = None
    method: str | None = None  # the engine's speculative method (none = the baseline)
    setting: str | None = None  # the setting's label in rankings, e.g. "ngram γ=4"


class MeasuredRecord(UnitRecord):
    """One generated prompt (or conversation) of one setting: latency, tokens and, on the
    transformers backend, the baseline's decode steps or the speculative rounds."""

    turns: int | None = None
    new_tokens: int | None = None
    wall_ms: float | None = None
    decode_ms: float | None = None
    tokens_per_s: float | None = None
    tpot_ms: float | None = None
    peak_memory_mb: float | None = None
    ttft_ms: list[float] | None = None
    e2e_ms: list[float] | None = None  # engine backends: per turn
    step_ms: list[float] | None = None  # transformers baseline: per decode step
    forward_ms: list[float] | None = None
    draft_prefill_ms: list[float] | None = None
    rounds: Rounds | None = None  # transformers spec records
    spec_counters: dict[str, Any] | None = None  # engine: per-request spec-decode counters
    counters_polluted: bool | None = None  # those counters showed other traffic (§17)
    response_spec: dict[str, Any] | None = None  # the engine's own per-request acceptance
    answers: list[str] | None = None  # with the text kept (data/privacy.py); else:
    answer_digest: str | None = None  # a keyed digest of the answers
    content: list[dict[str, Any]] | None = None  # answer checks (docs/theory.md §13)
    sampling: Literal["logged"] | None = None  # a logged request: its own settings in `request`
    request: dict[str, Any] | None = None
    # engine backends: content chunks and first → last chunk span per turn, the buffered flag
    # (analysis.serving.buffering); open loop: the arrival offset and the client-side wait before sending
    chunks: list[int] | None = None
    stream_span_ms: list[float | None] | None = None
    buffered: bool | None = None
    arrival_s: float | None = None
    queue_ms: float | None = None
    draw: int | None = None  # steady state (docs/serving.md): the draw, its phase, when done
    phase: Literal["warmup", "steady", "drain"] | None = None
    done_s: float | None = None


# What the transformers backend's analyses index (engine lines name their `backend`): required,
# so a line without one is an error naming the line and the field, not a KeyError in the analysis.
TRANSFORMERS_ROUNDS = (
    "gamma",
    "drafted",
    "accepted",
    "beta",
    "draft_ms",
    "verify_ms",
    "overhead_ms",
)


def _require_transformers_fields(rec: MeasuredRecord) -> MeasuredRecord:
    if rec.backend is not None or rec.status != "ok" or rec.kind not in ("baseline", "spec"):
        return rec
    missing = ["peak_memory_mb"] if rec.peak_memory_mb is None else []
    if rec.kind == "spec":
        got = rec.rounds
        missing += ["rounds"] if got is None else []
        missing += [f"rounds.{n}" for n in TRANSFORMERS_ROUNDS if got and getattr(got, n) is None]
    if missing:
        raise ValueError(
            f"field '{missing[0]}' is required on a transformers-backend {rec.kind} record"
        )
    return rec


class BaselineRecord(MeasuredRecord):
    kind: Literal["baseline"]
    _transformers_fields = model_validator(mode="after")(_require_transformers_fields)


class SpecRecord(MeasuredRecord):
    kind: Literal["spec"]
    _transformers_fields = model_validator(mode="after")(_require_transformers_fields)


class WarmupRecord(MeasuredRecord):
    """A warm-up prompt (written to warmup.jsonl, reported apart)."""

    kind: Literal["warmup_baseline", "warmup_spec"]


class FailedRecord(UnitRecord):
    """A unit whose generation raised: the error's first line; `--resume` retries it."""

    kind: Literal["failed"]
    error: str | None = None


class EngineMetricsRecord(Record):
    """Engine backends: one batch (setting × workload × temperature × concurrency × repeat) —
    the spec-decode counters read around it and its output throughput."""

    kind: Literal["engine_metrics"]
    workload: str
    temperature: float = Field(ge=0.0, allow_inf_nan=False)
    gamma: int = Field(ge=0)
    drafter: str = ""
    policy: str = ""
    repeat: int = Field(default=0, ge=0)
    concurrency: int = Field(default=1, ge=1)
    method: str | None = None
    setting: str | None = None
    metrics_available: bool = True
    spec_counters: dict[str, Any] | None = None
    accept_length_gauge: float | None = None
    counters_polluted: bool | None = None  # counter deltas show other traffic (theory.md §17)
    reconciliation: dict[str, Any] | None = None  # work, expected, excess, slack, polluted
    output_tokens_per_s: float | None = None
    partial: bool = False  # a resumed batch's rest (fewer prompts than planned)
    load: str | None = None  # open loop: the load point, its rate and this run of the batch
    rate: float | None = None
    attempt: str | None = None
    not_sent: int | None = None  # open loop: requests not sent before load.max_duration_s
    hit_bound: bool | None = None
    steady_window_s: list[float] | None = None  # steady state: [warm-up end, end]


class BatchTimingRecord(Record):
    """Transformers backend with `batch_timing`: one repetition of the batched forwards at one
    batch size over one workload's contexts (`spec.batch_timing`, docs/theory.md §18)."""

    kind: Literal["batch_timing"]
    workload: str
    batch_size: int = Field(ge=1)
    repeat: int = Field(default=0, ge=0)
    context_len: int = Field(ge=1)  # KV-cache positions each row holds before the forward
    draft_ms: float = Field(gt=0.0, allow_inf_nan=False)  # draft forward, b rows × 1 token
    gammas: list[int]  # the verify lengths measured (0 = a plain decode step)
    verify_ms: list[float]  # per γ: target forward over b rows × (γ + 1) tokens


KnownRecord = (
    BaselineRecord
    | SpecRecord
    | WarmupRecord
    | FailedRecord
    | EngineMetricsRecord
    | BatchTimingRecord
)
RECORD_MODELS: dict[str, type[Record]] = {
    "baseline": BaselineRecord,
    "spec": SpecRecord,
    "warmup_baseline": WarmupRecord,
    "warmup_spec": WarmupRecord,
    "failed": FailedRecord,
    "engine_metrics": EngineMetricsRecord,
    "batch_timing": BatchTimingRecord,
}
UNIT_KINDS = frozenset(k for k in RECORD_MODELS if k not in ("engine_metrics", "batch_timing"))


def record_json_schema() -> dict[str, Any]:
    """The JSON Schema of one records.jsonl line (any known kind, chosen by `kind`)."""
    adapter: TypeAdapter[Any] = TypeAdapter(Annotated[KnownRecord, Field(discriminator="kind")])
    return adapter.json_schema(by_alias=True)


def parse_record(rec: Any) -> Record:
    """The typed record of one line (a kind this specbench does not know stays a plain `Record`
    with its keys as extras); ValueError (one line: the field and what is wrong) if unusable."""
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
    try:
        return RECORD_MODELS.get(kind, Record).model_validate(rec)
    except ValidationError as err:
        first = err.errors()[0]
        if not first["loc"]:  # a whole-record check (model_validator): its message names the field
            raise ValueError(str(first["msg"]).removeprefix("Value error, ")) from None
        field = ".".join(str(p) for p in first["loc"])
        got = " ".join(repr(first.get("input"))[:60].split())
        raise ValueError(f"field '{field}': {first['msg']} (got {got})") from None


def _iter_parsed(path: Path) -> Iterator[tuple[dict[str, Any], Record]]:
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
            typed = parse_record(rec)
        except ValueError as exc:
            raise SpecbenchError(f"{path}: line {lineno}: {exc}") from None
        yield rec, typed


def iter_records(path: Path) -> Iterator[RecordLine]:
    """The records of a file as the JSON objects written (each validated by its kind's model),
    with `_iter_parsed`'s handling of truncated and malformed lines."""
    for rec, _ in _iter_parsed(path):
        yield cast(RecordLine, rec)  # checked by its kind's model (`RecordLine`'s docstring)


def read_typed_records(path: Path) -> list[Record]:
    """The records of a file as typed models (`BaselineRecord`, `SpecRecord`, …)."""
    return [typed for _, typed in _iter_parsed(path)]


MEASURED_KINDS = ("baseline", "spec")


def read_records(path: Path) -> list[RecordLine]:
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
