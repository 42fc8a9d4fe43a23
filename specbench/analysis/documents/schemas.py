"""The JSON Schemas of the files specbench writes, generated from their pydantic models.

Three formats: `results` (results.json, `analysis.documents.results_model.RunResults`), `accept`
(accept.json, `analysis.documents.accept_model.AcceptResults`) and `records` (one line of records.jsonl,
`records.record_json_schema`, any kind chosen by its `kind` field). They ship in docs/schema/ and
`specbench schema` prints or writes them; tests/unit/test_schemas.py fails while a shipped file
differs from what the models generate, so a changed model cannot land with a stale schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pydantic import JsonValue

from specbench.analysis.documents.accept_model import accept_json_schema
from specbench.analysis.documents.results_model import RunResults
from specbench.records import record_json_schema

SCHEMA_DIR = Path(__file__).resolve().parents[3] / "docs" / "schema"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"  # what pydantic generates

# name → the generator of its schema (the file each describes is in the module docstring)
SCHEMA_SOURCES: dict[str, Callable[[], dict[str, JsonValue]]] = {
    "results": lambda: RunResults.model_json_schema(by_alias=True),
    "accept": accept_json_schema,
    "records": record_json_schema,
}
SCHEMA_NAMES = tuple(SCHEMA_SOURCES)


def json_schema(name: str) -> dict[str, JsonValue]:
    """The JSON Schema (draft 2020-12) of one format: `results`, `accept` or `records`."""
    return {"$schema": JSON_SCHEMA_DIALECT, **SCHEMA_SOURCES[name]()}


def schema_text(schema: dict[str, JsonValue]) -> str:
    """A schema file's text (stable: sorted keys, one trailing newline)."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_schemas(out_dir: Path = SCHEMA_DIR) -> list[Path]:
    """Write OUT_DIR/NAME.schema.json for every format; return the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in SCHEMA_NAMES:
        path = out_dir / f"{name}.schema.json"
        path.write_text(schema_text(json_schema(name)), encoding="utf-8")
        paths.append(path)
    return paths
