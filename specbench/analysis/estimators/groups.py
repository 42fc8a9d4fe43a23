"""The analysis unit: one workload × temperature of a run, its records split by role.

`group_records` groups `tables.records_frame` by workload × temperature (in order of first
appearance) and, within a group, the speculative records by setting (drafter × policy × γ):

    {(workload, temperature): Group(baseline=[…], spec={(drafter, policy, γ): […]},
                                    failed=[…], metrics=[…])}

`failed` holds only the unresolved failures (`unresolved_failures`); `metrics` the engine
backends' per-batch counter records.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypedDict, cast

import pandas as pd

from specbench.analysis.documents.results_model import Failure
from specbench.analysis.estimators.tables import (
    SETTING_COLUMNS,
    UNIT_KEY,
    records_frame,
)
from specbench.record_line import RecordLine
from specbench.records import MEASURED_KINDS
from specbench.setting import SettingKey

Record = RecordLine
GroupKey = tuple[str, float]  # (workload, temperature)
ENGINE_METRICS_KIND = "engine_metrics"


class Group(TypedDict):
    baseline: list[Record]
    spec: dict[SettingKey, list[Record]]
    failed: list[Record]
    metrics: list[Record]


def _records(rows: pd.DataFrame) -> list[Record]:
    return list(rows["record"])


def _grouped(
    frame: pd.DataFrame, columns: list[str]
) -> Iterator[tuple[tuple[Any, ...], pd.DataFrame]]:
    """(key, rows) per distinct value of `columns`, in order of first appearance."""
    for key, rows in frame.groupby(columns, sort=False):
        yield cast(tuple[Any, ...], key), rows


def unresolved(frame: pd.DataFrame) -> pd.Series:
    """Per row of `records_frame`: a failed record that is the last failure of its unit, of a
    unit with no measured record in the file. `--resume` retries failed units and appends their
    new records (a record is never rewritten), so a failure followed by a success is history,
    not a failure of the run."""
    failed = frame[frame["kind"] == "failed"]
    last = failed.drop_duplicates(UNIT_KEY, keep="last")
    measured = frame.loc[frame["kind"].isin(MEASURED_KINDS), UNIT_KEY].drop_duplicates()
    joined = last.merge(measured, on=UNIT_KEY, how="left", indicator=True)
    keep = set(joined.loc[joined["_merge"] == "left_only", "pos"])
    return frame["pos"].isin(keep)


def unresolved_failures(records: Sequence[Record]) -> list[Record]:
    """The last failed record of each unit that has no successful record, in file order."""
    frame = records_frame(records)
    return _records(frame[unresolved(frame)])


def group_records(records: Sequence[Record]) -> dict[GroupKey, Group]:
    """Every workload × temperature with a measured or an unresolved failed unit, in file order."""
    frame = records_frame(records)
    frame = frame[frame["kind"].isin([*MEASURED_KINDS, ENGINE_METRICS_KIND]) | unresolved(frame)]
    frame = frame.assign(policy=frame["policy"].where(frame["policy"] != "", "fixed"))
    groups: dict[GroupKey, Group] = {}
    units = frame[frame["kind"] != ENGINE_METRICS_KIND]
    for (workload, temp), rows in _grouped(units, ["workload", "temperature"]):
        spec = rows[rows["kind"] == "spec"]
        groups[(str(workload), float(temp))] = Group(
            baseline=_records(rows[rows["kind"] == "baseline"]),
            spec={
                (str(d), str(p), int(g)): _records(s)
                for (d, p, g), s in _grouped(spec, SETTING_COLUMNS)
            },
            failed=_records(rows[rows["kind"] == "failed"]),
            metrics=[],
        )
    metrics = frame[frame["kind"] == ENGINE_METRICS_KIND]
    for (workload, temp), rows in _grouped(metrics, ["workload", "temperature"]):
        if (key := (str(workload), float(temp))) in groups:
            groups[key]["metrics"] = _records(rows)
    return groups


def is_engine_group(grp: Group) -> bool:
    """Measured by an engine backend (vllm / openai): records carry their concurrency."""
    return any("concurrency" in r for rs in [grp["baseline"], *grp["spec"].values()] for r in rs)


def failure_rows(grp: Group) -> list[Failure]:
    """results.json's `failures` of one group: its unresolved failed units."""
    return [
        Failure(
            workload=f["workload"],
            temperature=f["temperature"],
            gamma=f["gamma"],
            prompt_id=f["prompt_id"],
            error=f.get("error"),
        )
        for f in grp["failed"]
    ]
