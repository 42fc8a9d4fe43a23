"""Shared test data for `specbench accept`: eight logged requests in two buckets and a config
(tests/unit/test_cli_accept_rows.py parses them, tests/cli/test_cli_accept.py scores them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from specbench.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


def shipped_prompts(name: str) -> list[str]:
    """The first four prompts of a shipped dataset."""
    path = ROOT / "datasets" / f"{name}.jsonl"
    return [json.loads(line)["prompt"] for line in path.read_text().splitlines()[:4]]


def write_traffic(folder: Path) -> Path:
    """Eight logged requests in two buckets; any in-domain text serves as a logged response."""
    code, prose = shipped_prompts("tiny_code"), shipped_prompts("tiny_prose")
    rows = []
    for i in range(4):
        for rid, category, texts, temperature in (
            (f"c{i}", "code", code, 0.7),
            (f"p{i}", "prose", prose, 0.0),
        ):
            rows.append(
                {
                    "id": rid,
                    "category": category,
                    "prompt": texts[i],
                    "response": texts[(i + 1) % 4][:160],
                    "temperature": temperature,
                }
            )
    path = folder / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_accept_config(folder: Path) -> Path:
    cfg = {
        "name": "acc",
        "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
        "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}}],
        "sampling": {"temperatures": [0.0, 1.0]},
        "decision": {"margin": 0.05, "bootstrap": 500},
    }
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


# a well-formed logged row, for the bad-input tests to break one field of
GOOD = {"prompt": "def f(x):\n    return", "response": " x + 1\n", "category": "code"}


def write_rows(folder: Path, rows: list[dict[str, Any]]) -> str:
    """Logged rows as FOLDER/bad.jsonl; the path as text."""
    path = folder / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def fails_one_line(res: Any, *needles: str) -> None:
    """Exit code 2 with one `error:` line on stderr holding every needle, no traceback."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    line = res.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line, line
    for n in needles:
        assert n in line, line


def invoke(*args: str) -> Any:
    return runner.invoke(app, ["accept", *args])
