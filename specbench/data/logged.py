"""Logged traffic for `specbench accept`: read request logs where they live, as they were
logged, and keep a seeded sample per bucket while streaming (each row parsed by
data/logged_rows.py).

Fields of a row: data/logged_rows.py. Rows stream from any source `data.sources.iter_source` reads (local or fsspec URL; Parquet
reading only the columns the paths start in) or a Hugging Face dataset, and each bucket keeps
at most `max_requests` of them by reservoir sampling (`data.sample`), so memory holds the sample
and time is one pass. Rows are parsed as they are drawn into the sample (all of them without a
cap), so a malformed row is found when it would be measured: it stops the command with its
location unless `skip_bad`; skipped rows are reported (the first `MAX_SKIPPED_LISTED` one by
one, then counted), never dropped silently. A skipped row stops counting towards its bucket, so
the sample stays uniform over the usable rows drawn.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import specbench.data.sources as sources
from specbench.data.logged_rows import (
    BadRow,
    FieldNames,
    LoggedRequest,
    bucket_of,
    check_fields,
    parse_row,
)
from specbench.data.sample import Reservoirs
from specbench.data.sources import Row
from specbench.errors import SpecbenchError

MAX_SKIPPED_LISTED = 1000
_HF_DISK_MARKERS = ("dataset_info.json", "dataset_dict.json", "state.json")


def open_logged(
    data: str, split: str = "train", columns: list[str] | None = None, bad_lines: bool = False
) -> tuple[str, Iterable[Row]]:
    """(source name, rows) of a JSONL / CSV / Parquet file, a glob or folder of them, any fsspec
    URL, a `save_to_disk` folder, a folder of data files or a hub id. `bad_lines`: a JSONL line
    that is no usable object comes as a `sources.BadLine` row (--skip-bad-rows counts it)."""
    if sources.is_url(data):
        return sources.iter_source(data, None, columns, bad_lines)
    path = Path(data).expanduser()
    if path.is_file():
        if sources.format_from_name(path.name) is None:
            raise SpecbenchError(
                f"cannot tell the format of {path} from its extension; use .jsonl, .csv or .parquet"
            )
        return sources.iter_source(str(path), None, columns, bad_lines)
    if path.is_dir():
        if any((path / n).exists() for n in _HF_DISK_MARKERS):
            return str(path), sources.iter_hf(sources.load_hf_disk(path, split))
        loaded = sources.load_hf_hub(str(path), None, split, None, None)
        return str(path), sources.iter_hf(loaded)
    if any(c in data for c in "*?["):
        return sources.iter_source(str(path), None, columns, bad_lines)
    if data.startswith(("./", "../", "/", "~")) or sources.format_from_name(data):
        raise SpecbenchError(f"--data: file not found: {data}")
    return f"Hugging Face dataset '{data}'", sources.iter_hf(
        sources.load_hf_hub(data, None, split, None, None)
    )


@dataclass
class Selection:
    """The sampled requests (in source order) and what was left out."""

    requests: list[LoggedRequest]
    skipped: list[dict[str, str]]  # the first MAX_SKIPPED_LISTED malformed rows
    skipped_total: int
    rows_read: int
    bucket_rows: dict[str, int]  # rows per bucket before sampling (less those found malformed)

    def notes(self, wanted: list[str] | None) -> list[str]:
        """What the reader should know about the rows left out: buckets every row of which was
        malformed, and skipped rows beyond those listed one by one."""
        kept = {r.bucket for r in self.requests}
        emptied = sorted({s["bucket"] for s in self.skipped} - kept - {""})
        notes = [
            f"bucket '{b}': every row was malformed and skipped"
            for b in emptied
            if wanted is None or b in wanted
        ]
        if self.skipped_total > len(self.skipped):
            notes.append(
                f"{self.skipped_total} malformed rows skipped; the first {len(self.skipped)} "
                "are listed"
            )
        return notes


def select_requests(
    source: str,
    rows: Iterable[Row],
    f: FieldNames,
    top_k: int,
    skip_bad: bool,
    wanted: list[str] | None,
    max_requests: int | None,
    seed: int,
) -> Selection:
    """One pass over `rows`: parse each, keep the `wanted` buckets (each must have rows) and at
    most `max_requests` per bucket by seeded reservoir sampling."""
    reservoirs: Reservoirs[LoggedRequest] = Reservoirs(max_requests, seed)
    skipped: list[dict[str, str]] = []
    skipped_total, n_rows = 0, 0
    counts: Counter[str] = Counter()
    iterator: Iterator[Row] = iter(rows)
    checked = False  # the fields checked on the first usable row
    for row in iterator:
        n_rows += 1
        if isinstance(row.values, sources.BadLine):  # only with skip_bad (open_logged)
            skipped_total += 1
            if len(skipped) < MAX_SKIPPED_LISTED:
                skipped.append({"row": row.location, "reason": row.values.reason, "bucket": ""})
            continue
        if not checked:
            check_fields(source, row, f)
            checked = True
        bucket = bucket_of(row, f)
        if bucket is not None:
            counts[bucket] += 1
        if bucket is not None and wanted is not None and bucket not in wanted:
            continue
        # Only rows drawn into the sample are parsed (every row when there is no cap), so one
        # pass over a large log costs a field lookup and a random draw per row.
        slot = reservoirs.offer(bucket) if bucket is not None else None
        if bucket is not None and slot is None:
            continue
        try:
            request = parse_row(row, f, top_k)
        except BadRow as exc:
            if not skip_bad:
                raise SpecbenchError(
                    f"{source} {row.location}: {exc}; fix the row or pass --skip-bad-rows"
                ) from None
            if bucket is not None:
                counts[bucket] -= 1
                reservoirs.withdraw(bucket)
            skipped_total += 1
            if len(skipped) < MAX_SKIPPED_LISTED:
                skipped.append({"row": row.location, "reason": str(exc), "bucket": bucket or ""})
            continue
        assert bucket is not None and slot is not None  # a row without a bucket fails to parse
        reservoirs.put(bucket, slot, request)
    counts = Counter({b: n for b, n in counts.items() if n > 0})
    if not counts:
        raise SpecbenchError(f"{source} has no usable rows; nothing to measure")
    for name in wanted or []:
        if name not in counts:
            raise SpecbenchError(
                f"bucket '{name}' has no rows in {source}; buckets there: {', '.join(counts)}"
            )
    return Selection(reservoirs.sample(), skipped, skipped_total, n_rows, dict(counts))
