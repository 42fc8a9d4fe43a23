"""`specbench accept`'s input handling without a model: CSV, Parquet and JSONL rows parse alike, and
bad input is one line with exit code 2 (the tiny pair's names are in the config, never loaded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.accept_data import (
    GOOD,
    fails_one_line,
    invoke,
    write_accept_config,
    write_rows,
    write_traffic,
)


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_traffic(tmp_path_factory.mktemp("traffic"))


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_accept_config(tmp_path_factory.mktemp("cfg"))


def test_csv_parquet_and_jsonl_rows_parse_alike(traffic: Path, tmp_path: Path) -> None:
    from specbench.data.logged import open_logged, select_requests
    from specbench.data.logged_rows import FieldNames

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


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_missing_columns_are_one_line(config: Path, tmp_path: Path) -> None:
    data = write_rows(tmp_path, [{"prompt": "a", "answer": "b"}])
    fails_one_line(
        invoke("--config", str(config), "--data", data),
        "no column 'response'",
        "--response-field",
        "answer",
    )
    data = write_rows(tmp_path, [GOOD])
    fails_one_line(
        invoke("--config", str(config), "--data", data, "--bucket-by", "team"), "no column 'team'"
    )
    fails_one_line(
        invoke("--config", str(config), "--data", data, "--prompt-field", "question"),
        "no column 'question'",
    )


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_unknown_bucket_and_empty_data(config: Path, tmp_path: Path) -> None:
    data = write_rows(tmp_path, [GOOD])
    fails_one_line(
        invoke(
            "--config", str(config), "--data", data, "--bucket-by", "category", "--buckets", "chat"
        ),
        "bucket 'chat' has no rows",
        "code",
    )
    data = write_rows(tmp_path, [{**GOOD, "response": ""}])
    fails_one_line(
        invoke("--config", str(config), "--data", data, "--skip-bad-rows"), "no usable rows"
    )
    fails_one_line(
        invoke("--config", str(config), "--data", str(tmp_path / "nope.jsonl")), "not found"
    )
    fails_one_line(invoke("--data", data), "--config", "--target")
    fails_one_line(invoke("--config", str(config), "--data", data, "--t-target", "5"), "--t-draft")
