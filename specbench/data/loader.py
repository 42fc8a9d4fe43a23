"""Load a dataset source into prompts grouped by workload, and pick one workload's prompts.

Sources (exactly one per `DatasetSpec`):

- `name`: a shipped set, `<repo>/datasets/<name>.jsonl` (next to the `specbench` package in a
  checkout or editable install), else `./datasets/<name>.jsonl`.
- `path`: a local JSONL, CSV or Parquet file, a `save_to_disk` directory, a glob, or any fsspec
  URL (s3://, gs://, az://, http(s)://; see `sources.iter_source`). The format comes
  from `format`, else from the extension (a directory means `hf_disk`). JSONL rows with
  Spec-Bench's `question_id` + `category` + `turns` are read as Spec-Bench in `auto` mode.
- `hf_id`: `datasets.load_dataset(hf_id, hf_config, split=..., revision=...)`; a local folder of
  data files works too.
- `generate: long_context`: long operations logs with a question, generated deterministically
  (`data/long_context.py`; `prompt_words`, `documents`).
"""

from __future__ import annotations

import dataclasses
import random
import warnings
from pathlib import Path

import specbench
import specbench.data.sources as sources
from specbench.config import DatasetSpec, WorkloadSpec
from specbench.data.fields import field_mapping, looks_like_spec_bench, rows_to_prompts
from specbench.data.long_context import long_context_rows
from specbench.data.prompt import Prompt
from specbench.data.sources import RawRows
from specbench.errors import SpecbenchError

_FILE_FORMATS = ("jsonl", "csv", "parquet", "hf_disk")
_READERS = {
    "jsonl": sources.read_jsonl,
    "csv": sources.read_csv,
    "parquet": sources.read_parquet,
}


def shipped_dataset_dirs() -> list[Path]:
    """Folders searched for shipped sets, in order: the repo's datasets/, then ./datasets."""
    repo_dir = Path(specbench.__file__).resolve().parents[1] / "datasets"
    cwd_dir = Path.cwd() / "datasets"
    return [repo_dir] if repo_dir.resolve() == cwd_dir.resolve() else [repo_dir, cwd_dir]


def available_shipped_sets() -> list[str]:
    """Names of the shipped sets (`*.jsonl` stems) found in `shipped_dataset_dirs()`."""
    names = {p.stem for d in shipped_dataset_dirs() if d.is_dir() for p in d.glob("*.jsonl")}
    return sorted(names)


def _shipped_path(name: str) -> Path:
    available = available_shipped_sets()
    if name in available:
        for folder in shipped_dataset_dirs():
            candidate = folder / f"{name}.jsonl"
            if candidate.is_file():
                return candidate
    listed = ", ".join(available) if available else "none found"
    raise SpecbenchError(
        f"unknown shipped dataset '{name}'; use one of: {listed} (or dataset.path for your own file)"
    )


def _read_source(spec: DatasetSpec, base_dir: Path | None) -> tuple[RawRows, str]:
    """The source's rows and the schema to map them with ("specbench", "spec_bench", "generic")."""
    if spec.generate == "long_context":
        return long_context_rows(spec.documents, spec.prompt_words), "specbench"
    if spec.name:
        if spec.format not in ("auto", "specbench"):
            raise SpecbenchError(
                f"dataset.format '{spec.format}' does not apply to a shipped set; remove it"
            )
        return sources.read_jsonl(_shipped_path(spec.name)), "specbench"
    if spec.hf_id:
        if spec.format in _FILE_FORMATS:
            raise SpecbenchError(
                f"dataset.format '{spec.format}' applies to dataset.path, not hf_id; remove it"
            )
        raw = sources.read_hf_hub(spec.hf_id, spec.hf_config, spec.split, spec.revision, base_dir)
        return raw, _schema(spec.format, raw)
    assert spec.path is not None  # DatasetSpec guarantees exactly one source
    if sources.is_url(spec.path) or any(c in spec.path for c in "*?["):
        # an fsspec URL (s3://, gs://, az://, http(s)://, hf://) or a glob of files
        location = (
            spec.path
            if sources.is_url(spec.path)
            else str(sources.resolve_path(spec.path, base_dir))
        )
        fmt = spec.format if spec.format in ("jsonl", "csv", "parquet") else None
        name, rows = sources.iter_source(location, fmt)
        raw = RawRows(name, list(rows))
        return raw, _schema(spec.format, raw)
    path = sources.resolve_path(spec.path, base_dir)
    if not path.exists():
        raise SpecbenchError(
            f"dataset file not found: {path} (relative paths start at the config file's folder)"
        )
    reader_format = _reader_format(spec.format, path)
    if reader_format == "hf_disk":
        raw = sources.read_hf_disk(path, spec.split)
    else:
        raw = _READERS[reader_format](path)
    return raw, _schema(spec.format, raw)


def _reader_format(configured: str, path: Path) -> str:
    if configured in _FILE_FORMATS:
        return configured
    if path.is_dir():
        return "hf_disk"
    from_suffix = sources.format_from_suffix(path)
    if from_suffix is not None:
        return from_suffix
    if configured in ("specbench", "spec_bench"):
        return "jsonl"
    raise SpecbenchError(
        f"cannot tell the format of {path} from its extension; set dataset.format to one of: "
        "jsonl, csv, parquet, hf_disk, spec_bench"
    )


def _schema(configured: str, raw: RawRows) -> str:
    if configured in ("specbench", "spec_bench"):
        return configured
    return "spec_bench" if configured == "auto" and looks_like_spec_bench(raw) else "generic"


def _load_prompts(spec: DatasetSpec, base_dir: Path | None) -> tuple[str, list[Prompt]]:
    raw, schema = _read_source(spec, base_dir)
    return raw.source, rows_to_prompts(raw, field_mapping(spec, schema))


def load_dataset_rows(spec: DatasetSpec, base_dir: Path | None) -> dict[str, list[Prompt]]:
    """All prompts of a source grouped by workload (groups in order of first appearance, prompts
    in source order). The key "" holds prompts whose source says nothing about workloads."""
    _, prompts = _load_prompts(spec, base_dir)
    groups: dict[str, list[Prompt]] = {}
    for prompt in prompts:
        groups.setdefault(prompt.workload, []).append(prompt)
    return groups


def load_workload(workload: WorkloadSpec, seed: int, base_dir: Path | None = None) -> list[Prompt]:
    """The prompts of one configured workload, sampled reproducibly.

    Rows whose workload equals `workload.name` are kept; all rows are kept when the source has
    no workload information or is a shipped set (named by `dataset.name`). Then `workload.n`
    prompts are drawn with `random.Random(seed)` and returned in source order. Every returned
    prompt's `workload` is `workload.name` (a different source value stays in
    `meta["source_workload"]`).
    """
    source, prompts = _load_prompts(workload.dataset, base_dir)
    present = list(dict.fromkeys(p.workload for p in prompts))
    if workload.dataset.name or present == [""]:
        selected = prompts
    else:
        selected = [p for p in prompts if p.workload == workload.name]
    if not selected:
        named = ", ".join(w for w in present if w) or "none"
        raise SpecbenchError(
            f"workload '{workload.name}' has no prompts in {source}; workloads there: {named} "
            "(rename the workload or map categories with dataset.category_map)"
        )
    chosen = _sample(selected, workload.n, seed, workload.name)
    return [_renamed(p, workload.name) for p in chosen]


def _sample(prompts: list[Prompt], n: int | None, seed: int, name: str) -> list[Prompt]:
    if n is None or n >= len(prompts):
        if n is not None and n > len(prompts):
            warnings.warn(
                f"workload '{name}' asks for n={n} prompts but its dataset has {len(prompts)}; "
                "using all of them",
                stacklevel=3,
            )
        return list(prompts)
    picked = sorted(random.Random(seed).sample(range(len(prompts)), n))
    return [prompts[i] for i in picked]


def _renamed(prompt: Prompt, name: str) -> Prompt:
    if prompt.workload == name:
        return prompt
    meta = dict(prompt.meta)
    if prompt.workload:
        meta.setdefault("source_workload", prompt.workload)
    return dataclasses.replace(prompt, workload=name, meta=meta)
