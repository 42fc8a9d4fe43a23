"""Read a dataset source into plain rows (column → value dicts), each with a location such as
"line 3" or "row 3" for error messages. No field mapping happens here (see `fields.py`).

Readers: JSONL (one JSON object per line), CSV (header row; every value is text), Parquet
(via pyarrow), a `Dataset.save_to_disk` directory (`datasets.load_from_disk`) and a Hugging Face
dataset id or local data folder (`datasets.load_dataset`). `datasets` is imported lazily: it is
slow to import and only needed for the last two.

Remote sources: any fsspec URL (`s3://`, `gs://`, `az://`, `http(s)://`, `hf://`, `memory://`)
with a glob (`s3://logs/2025-*/part-*.parquet`) or a folder of files. Credentials come from the
environment as each fsspec backend reads them (AWS_*, GOOGLE_APPLICATION_CREDENTIALS, AZURE_*).
`iter_source` streams rows: JSONL line by line and Parquet in record batches of the columns
asked for, so a caller that samples while it reads (`data.sample.Reservoirs`) holds only its
sample, never the file.
"""

from __future__ import annotations

import csv
import importlib
import io
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from specbench.data.jsonl import BadLine, Row, jsonl_rows
from specbench.data.reachable import not_found
from specbench.errors import SpecbenchError

__all__ = ["BadLine", "Row"]  # re-exported: every reader's row type (and its readers below)

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
    _check_local(path)
    return _non_empty(list(jsonl_rows(_local_fs(), str(path), str(path))), str(path))


def read_csv(path: Path) -> RawRows:
    """A CSV file with a header row; values stay text (empty cells are ""). Quoting is strict and
    every row must have one value per column, so a stray comma or quote is reported, not
    silently merged into a neighbouring prompt."""
    _check_local(path)
    return _non_empty(list(_csv_rows(_local_fs(), str(path), str(path))), str(path))


def read_parquet(path: Path) -> RawRows:
    """A Parquet file (or a folder of Parquet files) read with pyarrow."""
    source, rows = iter_source(str(path), "parquet")
    return RawRows(source, list(rows))


def _csv_rows(fs: Any, path: str, name: str) -> Iterator[Row]:
    csv.field_size_limit(_CSV_FIELD_LIMIT)
    with fs.open(path, "rb", compression="infer") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
        reader = csv.DictReader(text, strict=True)
        try:
            for row_no, record in enumerate(reader, start=1):
                if None in record or None in record.values():
                    raise SpecbenchError(
                        f"{name} row {row_no} does not have one value per header column; quote "
                        "values that contain commas or line breaks"
                    )
                yield Row(location=f"row {row_no}", values=dict(record))
        except csv.Error as exc:
            raise SpecbenchError(
                f"{name} is not a readable CSV file (line {reader.line_num}: {exc}); fix the file"
            ) from None
        except UnicodeDecodeError:
            raise SpecbenchError(f"{name} is not UTF-8 text; re-save it as UTF-8") from None


def _parquet_rows(
    fs: Any, path: str, name: str, columns: Sequence[str] | None, start: int = 0
) -> Iterator[Row]:
    """Stream a Parquet file in record batches of `columns` (all when None, or when one of them
    is not in the file, so that an error can list every column)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with fs.open(path, "rb") as fh:
            pf = pq.ParquetFile(fh)
            names = pf.schema_arrow.names
            cols = list(dict.fromkeys(columns)) if columns is not None else None
            if cols is not None and not set(cols) <= set(names):
                cols = None
            n = start
            for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=cols):
                for record in batch.to_pylist():
                    n += 1
                    yield Row(location=f"row {n}", values=record)
    except (pa.ArrowException, OSError) as exc:
        raise SpecbenchError(
            f"{name} is not a readable Parquet file ({_first_line(exc)}); check the file"
        ) from None


def read_hf_disk(path: Path, split: str) -> RawRows:
    """A `save_to_disk` directory; from a `DatasetDict` the `split` is taken."""
    return _hf_rows(load_hf_disk(path, split), str(path))


def load_hf_disk(path: Path, split: str) -> Any:
    """The `datasets.Dataset` of a `save_to_disk` directory (its `split` for a DatasetDict)."""
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
    return loaded


def read_hf_hub(
    hf_id: str, hf_config: str | None, split: str, revision: str | None, base_dir: Path | None
) -> RawRows:
    """`datasets.load_dataset(hf_id, hf_config, split=..., revision=...)` as rows."""
    loaded = load_hf_hub(hf_id, hf_config, split, revision, base_dir)
    return _hf_rows(loaded, f"Hugging Face dataset '{hf_id}'")


def load_hf_hub(
    hf_id: str, hf_config: str | None, split: str, revision: str | None, base_dir: Path | None
) -> Any:
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
    return loaded


def _hf_datasets() -> Any:
    """The Hugging Face `datasets` module, imported on first use. (Imported by name so type
    checkers run from the repo root do not mistake the repo's datasets/ folder for it.)"""
    return importlib.import_module("datasets")


def _hf_rows(dataset: Any, source: str) -> RawRows:
    records = dataset.to_list()
    rows = [Row(location=f"row {i}", values=r) for i, r in enumerate(records, start=1)]
    return _non_empty(rows, source)


def _check_local(path: Path) -> None:
    if not path.is_file():
        raise SpecbenchError(
            f"dataset file not found: {path} (relative paths start at the config file's folder)"
        )


def _local_fs() -> Any:
    from fsspec.implementations.local import LocalFileSystem

    return LocalFileSystem()


# --------------------------------------------------------------------------------------------
# streaming from any fsspec location

# the fsspec backend package each scheme needs (fsspec names it in an ImportError; we say what to
# install in one line instead of passing its traceback on)
BACKEND_PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "az": "adlfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "adl": "adlfs",
    "http": "aiohttp",
    "https": "aiohttp",
}
_COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst", ".lz4")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
BATCH_ROWS = 4096  # rows per Parquet record batch: a few MB of Python objects for chat logs


def is_url(text: str) -> bool:
    """True for `scheme://…` (a remote or in-memory location; `file://` too)."""
    return bool(_URL.match(text))


def format_from_name(name: str) -> str | None:
    """The reader format a file name implies (a compression suffix such as .gz is looked
    through), or None."""
    suffixes = [s.lower() for s in PurePosixPath(name).suffixes]
    if suffixes and suffixes[-1] in _COMPRESSIONS:
        suffixes = suffixes[:-1]
    return SUFFIX_FORMATS.get(suffixes[-1]) if suffixes else None


@dataclass(frozen=True)
class SourceFiles:
    """The files a location names: one file, a glob's matches or a folder's data files."""

    source: str  # the location as given, for messages
    fs: Any  # an fsspec filesystem
    paths: list[str]


def resolve_files(location: str) -> SourceFiles:
    """The files at `location` (a local path or an fsspec URL, with or without a glob)."""
    import fsspec

    scheme = location.split("://", 1)[0].lower() if is_url(location) else "file"
    try:
        fs, root = fsspec.core.url_to_fs(location)
    except ImportError:
        package = BACKEND_PACKAGES.get(scheme, f"the fsspec backend for {scheme}://")
        raise SpecbenchError(
            f"reading {scheme}:// needs the '{package}' package, which is not installed; "
            f"pip install {package} (credentials are read from the environment as it reads them)"
        ) from None
    except ValueError as exc:  # an unknown protocol
        raise SpecbenchError(
            f"cannot read '{location}' ({_first_line(exc)}); use a local path or an s3://, gs://, "
            "az://, http(s):// or hf:// URL"
        ) from None
    http = scheme in ("http", "https")  # no listing over plain HTTP: one file per URL
    try:
        if not http and any(c in root for c in "*?["):
            paths = sorted(fs.glob(root))
            if not paths:
                raise SpecbenchError(f"no file matches {location}; check the pattern")
        elif not http and fs.isdir(root):
            paths = sorted(p for p in fs.find(root) if format_from_name(p))
            if not paths:
                raise SpecbenchError(
                    f"{location} is a folder without .jsonl, .csv or .parquet files"
                )
        elif not fs.exists(root):
            raise SpecbenchError(not_found(location, http))
        else:
            paths = [root]
    except (OSError, PermissionError) as exc:
        raise SpecbenchError(
            f"cannot list {location} ({_first_line(exc)}); check the URL and the credentials in "
            "the environment"
        ) from None
    return SourceFiles(location, fs, paths)


def iter_source(
    location: str,
    fmt: str | None = None,
    columns: Sequence[str] | None = None,
    bad_lines: bool = False,
) -> tuple[str, Iterator[Row]]:
    """(source name, rows streamed from every file at `location`).

    `fmt` ("jsonl", "csv", "parquet") overrides the extension; `columns` limits a Parquet read
    to the top-level columns named (others are never decoded). Rows of a multi-file source are
    located as "part-0001.parquet row 3". Reading happens as the iterator is consumed.
    `bad_lines`: a JSONL line that is no usable object is a `BadLine` row, not an error.
    """
    files = resolve_files(location)
    formats = []
    for path in files.paths:
        f = fmt or format_from_name(path)
        if f is None:
            raise SpecbenchError(
                f"cannot tell the format of {path} from its extension; use .jsonl, .csv or "
                ".parquet (optionally compressed, e.g. .jsonl.gz)"
            )
        formats.append(f)
    several = len(files.paths) > 1

    def rows() -> Iterator[Row]:
        seen = False
        for path, f in zip(files.paths, formats, strict=True):
            name = files.fs.unstrip_protocol(path) if is_url(location) else path
            if f == "parquet":
                stream = _parquet_rows(files.fs, path, name, columns)
            elif f == "csv":
                stream = _csv_rows(files.fs, path, name)
            else:
                stream = jsonl_rows(files.fs, path, name, bad_lines)
            prefix = f"{PurePosixPath(path).name} " if several else ""
            for row in stream:
                seen = True
                yield Row(prefix + row.location, row.values) if prefix else row
        if not seen:
            raise SpecbenchError(f"{location} is empty; add at least one row to it")

    return location, rows()


def iter_hf(dataset: Any) -> Iterable[Row]:
    """The rows of a loaded `datasets.Dataset` one at a time (it is memory-mapped Arrow)."""
    for i, record in enumerate(dataset, start=1):
        yield Row(location=f"row {i}", values=record)


def _first_line(exc: BaseException) -> str:
    """An exception's message reduced to one line (or its type name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
