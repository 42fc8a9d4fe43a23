"""Typed records, their JSON Schema, and the record tables and groups the analysis builds on."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.analysis.estimators.groups import group_records, unresolved_failures
from specbench.analysis.estimators.tables import records_frame, rounds_frame
from specbench.records import (
    TRANSFORMERS_ROUNDS,
    FailedRecord,
    SpecRecord,
    parse_record,
    record_json_schema,
)


def unit(kind: str, prompt: str, gamma: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "schema": 1,
        "kind": kind,
        "unit_kind": "spec" if gamma else "baseline",
        "workload": "w",
        "temperature": 0.0,
        "gamma": gamma,
        "drafter": "model" if gamma else "",
        "policy": "fixed" if gamma else "",
        "prompt_id": prompt,
        "repeat": 0,
        **extra,
    }


ROUNDS = {
    "gamma": [2, 2, 2],
    "drafted": [2, 2, 0],
    "accepted": [2, 1, 0],
    "emitted": [3, 2, 1],
    "beta": [[1.0, 1.0], [1.0, 0.0], []],
    "draft_top_prob": [[0.9, 0.8], [0.9, 0.5], []],
    "draft_ms": [[1.0, 2.0], [1.0, 1.0], []],
    "verify_ms": [5.0, 5.0, 4.0],
    "overhead_ms": [0.5, 0.5, 0.5],
}


def test_typed_record_round_trips_the_line() -> None:
    line = unit(
        "spec", "p1", 2, rounds=ROUNDS, wall_ms=12.5, peak_memory_mb=9.0, extra_field=[1, 2]
    )
    rec = parse_record(line)
    assert isinstance(rec, SpecRecord) and rec.rounds is not None
    assert rec.rounds.accepted == [2, 1, 0] and rec.schema_version == 1
    assert rec.model_dump(by_alias=True, exclude_unset=True) == line  # unknown keys kept
    failed = parse_record(unit("failed", "p1", 2, status="failed", error="boom"))
    assert isinstance(failed, FailedRecord) and failed.error == "boom"
    with pytest.raises(ValueError, match="field 'temperature'"):
        parse_record({**line, "temperature": -1.0})


# A transformers-backend line without what its analyses index is refused on read, naming the field
# (was a KeyError, exit 3, in report / simulate / compare); an engine line (it names its backend)
# and a failed unit need none of them.
MISSING = [
    ("baseline", 0, "peak_memory_mb"),
    ("spec", 2, "peak_memory_mb"),
    ("spec", 2, "rounds"),
    *[("spec", 2, f"rounds.{name}") for name in TRANSFORMERS_ROUNDS],
]


@pytest.mark.parametrize(
    ("kind", "gamma", "field"), MISSING, ids=[f"{k}-{f}" for k, _, f in MISSING]
)
def test_transformers_record_without_an_indexed_field_is_refused(
    kind: str, gamma: int, field: str
) -> None:
    line = unit(
        kind, "p1", gamma, peak_memory_mb=9.0, **({"rounds": dict(ROUNDS)} if gamma else {})
    )
    parse_record(line)  # the complete line reads
    if field.startswith("rounds."):
        del line["rounds"][field.removeprefix("rounds.")]
    else:
        del line[field]
    with pytest.raises(ValueError, match=f"field '{field}' is required"):
        parse_record(line)
    parse_record({**line, "backend": "openai"})  # an engine line measures no rounds
    parse_record({**line, "status": "failed"})


def test_record_json_schema_covers_every_kind() -> None:
    schema = record_json_schema()
    kinds = set(schema["discriminator"]["mapping"])
    assert kinds == {
        "baseline",
        "spec",
        "warmup_baseline",
        "warmup_spec",
        "failed",
        "engine_metrics",
        "batch_timing",
    }
    spec = schema["$defs"]["SpecRecord"]
    assert "schema" in spec["properties"] and "workload" in spec["required"]


def test_rounds_frame_has_one_row_per_round() -> None:
    frame = rounds_frame([unit("baseline", "p1"), unit("spec", "p1", 2, rounds=ROUNDS)])
    assert len(frame) == 3
    assert frame["draft_ms"].tolist() == [3.0, 2.0, 0.0]
    assert int((frame["drafted"] == 0).sum()) == 1


def test_failure_resolved_by_resume_is_history() -> None:
    first = unit("failed", "p1", 2, status="failed", error="a")
    again = unit("failed", "p1", 2, status="failed", error="b")
    other = unit("failed", "p2", 2, status="failed", error="c")
    ok = unit("spec", "p2", 2, rounds=ROUNDS)
    records = [first, other, again, ok, unit("baseline", "p1")]
    assert unresolved_failures(records) == [again]  # the latest failure of p1; p2 later ran
    assert list(records_frame(records)["pos"]) == [0, 1, 2, 3, 4]
    (grp,) = group_records(records).values()
    assert grp["failed"] == [again]
    assert grp["spec"] == {("model", "fixed", 2): [ok]}
    assert grp["baseline"] == [records[4]] and grp["metrics"] == []


def test_groups_keep_file_order_and_name_the_default_policy() -> None:
    records = [
        {**unit("baseline", "p1"), "temperature": 1.0},
        unit("spec", "p1", 4, policy=""),
        unit("baseline", "p1"),
        unit("spec", "p1", 2),
    ]
    groups = group_records(records)
    assert list(groups) == [("w", 1.0), ("w", 0.0)]
    assert list(groups[("w", 0.0)]["spec"]) == [("model", "fixed", 4), ("model", "fixed", 2)]
