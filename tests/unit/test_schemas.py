"""The shipped JSON Schemas (docs/schema/) are what the models generate, `specbench schema`
prints and writes them, and the records schema accepts the lines a real run wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.analysis.documents.schemas import SCHEMA_DIR, SCHEMA_NAMES, json_schema, schema_text
from specbench.cli.app import run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_the_shipped_schema_is_the_models(name: str) -> None:
    path = SCHEMA_DIR / f"{name}.schema.json"
    assert path.is_file(), f"{path} missing: run specbench schema --out docs/schema"
    assert path.read_text(encoding="utf-8") == schema_text(json_schema(name)), (
        f"{path} is out of date: run specbench schema --out docs/schema"
    )


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_schema_command_prints_and_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["schema", "records"]) == 0
    assert json.loads(capsys.readouterr().out) == json_schema("records")
    assert run_cli(["schema", "--out", str(tmp_path / "s")]) == 0
    written = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert written == sorted(f"{n}.schema.json" for n in SCHEMA_NAMES)
    assert run_cli(["schema", "nonsense"]) == 2
    assert run_cli(["schema"]) == 2


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_the_records_schema_accepts_a_real_run_and_rejects_a_broken_line() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json_schema("records"))
    lines = (ROOT / "docs" / "example-run" / "records.jsonl").read_text().splitlines()
    kinds = set()
    for line in lines:
        rec = json.loads(line)
        kinds.add(rec["kind"])
        errors = [e.message for e in validator.iter_errors(rec)]
        assert not errors, (rec["kind"], errors[:3])
    assert {"baseline", "spec"} <= kinds
    broken = json.loads(lines[-1])
    broken["gamma"] = "four"
    assert not validator.is_valid(broken)
