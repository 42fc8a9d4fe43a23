"""CLI basics that need no model: the version, help within 80 columns, a broken config as one error
line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import specbench
from specbench.cli.app import app

ROOT = Path(__file__).resolve().parents[2]


runner = CliRunner(env={"COLUMNS": "80", "NO_COLOR": "1"})


def test_version() -> None:
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"specbench {specbench.__version__}"


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_help_fits_80_columns() -> None:
    names = [c.name or c.callback.__name__ for c in app.registered_commands]  # type: ignore[union-attr]
    assert "validate" in names
    for args in [["--help"], *[[n, "--help"] for n in names]]:
        res = runner.invoke(app, args)
        assert res.exit_code == 0, args
        wide = [line for line in res.output.splitlines() if len(line) > 80]
        assert not wide, (args, wide[:2])


def _bad(tmp_path: Path, **over: object) -> Path:
    cfg = yaml.safe_load((ROOT / "configs" / "tiny.yaml").read_text())
    cfg.update(over)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"gammas": [0, 2]}, "gammas"),
        ({"gamas": [1, 2]}, "did you mean 'gammas'"),
        ({"workloads": [{"name": "x", "dataset": {"path": "nowhere.jsonl"}}]}, "nowhere.jsonl"),
        ({"target": {"model": "./no/such/model"}}, "model directory not found"),
    ],
)
def test_a_broken_config_is_one_error_line_exit_2(
    tmp_path: Path, over: dict[str, object], says: str
) -> None:
    res = runner.invoke(app, ["validate", str(_bad(tmp_path, **over))])
    assert res.exit_code == 2
    errors = [x for x in res.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], res.stderr
    assert "Traceback" not in res.output
