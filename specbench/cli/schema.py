"""`specbench schema`: the JSON Schema of a file specbench writes, generated from its model.

    specbench schema results                 # results.json, to stdout
    specbench schema records                 # one line of records.jsonl
    specbench schema --out docs/schema       # every schema, as NAME.schema.json

The same files ship in docs/schema/ (analysis/documents/schemas.py; a test keeps them current).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer


def schema(
    name: Annotated[
        Literal["results", "accept", "records"] | None,
        typer.Argument(
            help="results (results.json), accept (accept.json) or records (a line of records.jsonl)."
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Write every schema as OUT/NAME.schema.json instead of printing one."
        ),
    ] = None,
) -> None:
    """Print the JSON Schema of results.json, accept.json or a records line (or write them all)."""
    from specbench.analysis.documents.schemas import json_schema, schema_text, write_schemas
    from specbench.errors import SpecbenchError

    if out is not None:
        if name is not None:
            raise SpecbenchError("give a schema NAME or --out DIR, not both")
        for path in write_schemas(out):
            typer.echo(str(path))
        return
    if name is None:
        raise SpecbenchError("name a schema: results, accept or records (or --out DIR for all)")
    typer.echo(schema_text(json_schema(name)), nl=False)
