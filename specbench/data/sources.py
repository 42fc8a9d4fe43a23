"""Read a dataset source into plain rows (column → value dicts), each with a location such as
"line 3" or "row 3" for error messages. No field mapping happens here (see `fields.py`).

Readers: JSONL (one JSON object per line), CSV (header row; every value is text), Parquet
(via pyarrow), a `Dataset.save_to_disk` directory (`datasets.load_from_disk`) and a Hugging Face
dataset id or local data folder (`datasets.load_dataset`). `datasets` is imported lazily: it is
slow to import and only needed for the last two.
"""

from __future__ import annotations

import csv
import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.errors import SpecbenchError

# file suffix → reader format, for `format: auto`
SUFFIX_FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_CSV_FIELD_LIMIT = 2**31 - 1  # long RAG / summarization prompts exceed csv's 128 KiB default


@dataclass(frozen=True)
class Row:
    """One record of a source: where it is ("line 3", "row 3") and its column values."""

    location: str
    values: dict[str, Any]


@dataclass(frozen=True)
class RawRows:
    """All records of a source; `source` names it in error messages (a path or a dataset id)."""

    source: str
    rows: list[Row]


def resolve_path(path: str, base_dir: Path | None) -> Path:
    """`path` made absolute against `base_dir` (the config file's directory), else the cwd."""
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        candidate = (base_dir if base_dir is not None else Path.cwd()) / candidate
    return candidate


def format_from_suffix(path: Path) -> str | None:
    """The reader format a file's extension implies, or None when it implies none."""
    return SUFFIX_FORMATS.get(path.suffix.lower())


def _non_empty(rows: list[Row], source: str) -> RawRows:
    if not rows:
        raise SpecbenchError(f"{source} is empty; add at least one prompt to it")
    return RawRows(source=source, rows=rows)


def read_jsonl(path: Path) -> RawRows:
    """One JSON object per non-blank line; a bad line is reported with the file and line number."""
    text = _read_text(path)
    rows: list[Row] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SpecbenchError(
                f"{path} line {line_no}: invalid JSON ({exc.msg}); fix or remove that line"
            ) from None
        if not isinstance(value, dict):
            raise SpecbenchError(
                f"{path} line {line_no}: expected a JSON object, got {type(value).__name__}; "
                "write one object per line"
            )
        rows.append(Row(location=f"line {line_no}", values=value))
    return _non_empty(rows, str(path))


def read_csv(path: Path) -> RawRows:
    """A CSV file with a header row; values stay text (empty cells are ""). Quoting is strict and
    every row must have one value per column, so a stray comma or quote is reported, not
    silently merged into a neighbouring prompt."""
    text = _read_text(path)
    csv.field_size_limit(_CSV_FIELD_LIMIT)
    rows: list[Row] = []
    reader = csv.DictReader(text.splitlines(keepends=True), strict=True)
    try:
        for row_no, record in enumerate(reader, start=1):
            if None in record or None in record.values():
                raise SpecbenchError(
                    f"{path} row {row_no} does not have one value per header column; quote "
                    "values that contain commas or line breaks"
                )
            rows.append(Row(location=f"row {row_no}", values=dict(record)))
    except csv.Error as exc:
        raise SpecbenchError(
            f"{path} is not a readable CSV file (line {reader.line_num}: {exc}); fix the file"
        ) from None
    return _non_empty(rows, str(path))


def read_parquet(path: Path) -> RawRows:
    """A Parquet file (or a folder of Parquet files) read with pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        records = pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise SpecbenchError(
            f"{path} is not a readable Parquet file ({_first_line(exc)}); check the file"
        ) from None
    rows = [Row(location=f"row {i}", values=r) for i, r in enumerate(records, start=1)]
    return _non_empty(rows, str(path))


def read_hf_disk(path: Path, split: str) -> RawRows:
    """A `save_to_disk` directory; from a `DatasetDict` the `split` is taken."""
    datasets = _hf_datasets()

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # datasets raises several types for a non-dataset directory
        raise SpecbenchError(
            f"{path} is not a directory written by save_to_disk ({_first_line(exc)}); "
            f"for a folder of data files use 'hf_id: {path}' instead"
        ) from None
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise SpecbenchError(
                f"{path} has no split '{split}'; set dataset.split to one of: "
                f"{', '.join(sorted(loaded))}"
            )
        loaded = loaded[split]
    return _hf_rows(loaded, str(path))


def read_hf_hub(
    hf_id: str, hf_config: str | None, split: str, revision: str | None, base_dir: Path | None
) -> RawRows:
    """`datasets.load_dataset(hf_id, hf_config, split=..., revision=...)`.

    `hf_id` may also be a local folder of data files (relative to `base_dir` when it exists
    there); `load_dataset` then picks the builder (parquet, json, csv) from the files.
    """
    datasets = _hf_datasets()

    local = resolve_path(hf_id, base_dir)
    target = str(local) if local.is_dir() else hf_id
    try:
        loaded = datasets.load_dataset(target, hf_config, split=split, revision=revision)
    except Exception as exc:  # hub, network, builder and split errors have many types
        config = f", config '{hf_config}'" if hf_config else ""
        raise SpecbenchError(
            f"could not load Hugging Face dataset '{hf_id}' (split '{split}'{config}): "
            f"{_first_line(exc)}; check dataset.hf_id, hf_config and split, and that the hub "
            "is reachable or the dataset is cached"
        ) from None
    return _hf_rows(loaded, f"Hugging Face dataset '{hf_id}'")


def _hf_datasets() -> Any:
    """The Hugging Face `datasets` module, imported on first use. (Imported by name so type
    checkers run from the repo root do not mistake the repo's datasets/ folder for it.)"""
    return importlib.import_module("datasets")


def _hf_rows(dataset: Any, source: str) -> RawRows:
    records = dataset.to_list()
    rows = [Row(location=f"row {i}", values=r) for i, r in enumerate(records, start=1)]
    return _non_empty(rows, source)


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise SpecbenchError(
            f"dataset file not found: {path} (relative paths start at the config file's folder)"
        )
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise SpecbenchError(f"{path} is not UTF-8 text; re-save it as UTF-8") from None
    except OSError as exc:
        raise SpecbenchError(
            f"cannot read {path} ({exc.strerror}); check its permissions"
        ) from None


def _first_line(exc: BaseException) -> str:
    """An exception's message reduced to one line (or its type name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
