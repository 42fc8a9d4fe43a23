"""`specbench accept`'s input handling without a model: CSV, Parquet and JSONL rows parse alike, and
bad input is one line with exit code 2 (the tiny pair's names are in the config, never loaded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli.app import app

runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


def _prompts(name: str) -> list[str]:
    path = Path(__file__).resolve().parents[2] / "datasets" / f"{name}.jsonl"
    return [json.loads(line)["prompt"] for line in path.read_text().splitlines()[:4]]


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight logged requests in two buckets; any in-domain text serves as a logged response."""
    code, prose = _prompts("tiny_code"), _prompts("tiny_prose")
    rows = []
    for i in range(4):
        rows.append(
            {
                "id": f"c{i}",
                "category": "code",
                "prompt": code[i],
                "response": code[(i + 1) % 4][:160],
                "temperature": 0.7,
            }
        )
        rows.append(
            {
                "id": f"p{i}",
                "category": "prose",
                "prompt": prose[i],
                "response": prose[(i + 1) % 4][:160],
                "temperature": 0.0,
            }
        )
    path = tmp_path_factory.mktemp("traffic") / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cfg = {
        "name": "acc",
        "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
        "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}}],
        "sampling": {"temperatures": [0.0, 1.0]},
        "decision": {"margin": 0.05, "bootstrap": 500},
    }
    path = tmp_path_factory.mktemp("cfg") / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def invoke(*args: str) -> Any:
    return runner.invoke(app, ["accept", *args])


def test_csv_parquet_and_jsonl_rows_parse_alike(traffic: Path, tmp_path: Path) -> None:
    from specbench.data.logged import FieldNames, open_logged, select_requests

    df = pd.DataFrame([json.loads(line) for line in traffic.read_text().splitlines()])
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet")
    fields = FieldNames(bucket="category")

    def parsed(path: Path) -> list[tuple[Any, ...]]:
        source, rows = open_logged(str(path), columns=fields.columns())
        sel = select_requests(source, rows, fields, 0, False, None, None, 0)
        assert not sel.skipped and sel.rows_read == 8
        return [(r.id, r.bucket, r.messages, r.response, r.params) for r in sel.requests]

    want = parsed(traffic)
    assert len(want) == 8 and want[0][4].temperature == 0.7  # type: ignore[union-attr]
    assert parsed(tmp_path / "t.csv") == want
    assert parsed(tmp_path / "t.parquet") == want


def _write(tmp_path: Path, rows: list[dict[str, Any]]) -> str:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _fails(res: Any, *needles: str) -> None:
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    line = res.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line, line
    for n in needles:
        assert n in line, line


GOOD = {"prompt": "def f(x):\n    return", "response": " x + 1\n", "category": "code"}


def test_missing_columns_are_one_line(config: Path, tmp_path: Path) -> None:
    data = _write(tmp_path, [{"prompt": "a", "answer": "b"}])
    _fails(
        invoke("--config", str(config), "--data", data),
        "no column 'response'",
        "--response-field",
        "answer",
    )
    data = _write(tmp_path, [GOOD])
    _fails(
        invoke("--config", str(config), "--data", data, "--bucket-by", "team"), "no column 'team'"
    )
    _fails(
        invoke("--config", str(config), "--data", data, "--prompt-field", "question"),
        "no column 'question'",
    )


def test_unknown_bucket_and_empty_data(config: Path, tmp_path: Path) -> None:
    data = _write(tmp_path, [GOOD])
    _fails(
        invoke(
            "--config", str(config), "--data", data, "--bucket-by", "category", "--buckets", "chat"
        ),
        "bucket 'chat' has no rows",
        "code",
    )
    data = _write(tmp_path, [{**GOOD, "response": ""}])
    _fails(invoke("--config", str(config), "--data", data, "--skip-bad-rows"), "no usable rows")
    _fails(invoke("--config", str(config), "--data", str(tmp_path / "nope.jsonl")), "not found")
    _fails(invoke("--data", data), "--config", "--target")
    _fails(invoke("--config", str(config), "--data", data, "--t-target", "5"), "--t-draft")
