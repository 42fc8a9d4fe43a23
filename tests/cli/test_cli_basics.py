"""`--version`, `validate`, help at 80 columns."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner(env={"COLUMNS": "80", "NO_COLOR": "1"})


@pytest.mark.slow
def test_every_shipped_config_validates_offline() -> None:
    configs = sorted(str(p) for p in (ROOT / "configs").glob("*.yaml"))
    res = runner.invoke(app, ["validate", *configs, "--offline"])
    assert res.exit_code == 0, res.output
    assert res.stdout.count(": valid (") == len(configs)
    assert "configs/llama70b.yaml" in res.stderr and "not available locally" in res.stderr
    # shipped configs ask for no more prompts than their sets hold, at reachable concurrency
    assert "asks for" not in res.stderr and "concurrency" not in res.stderr


def _bad(tmp_path: Path, **over: object) -> Path:
    cfg = yaml.safe_load((ROOT / "configs" / "tiny.yaml").read_text())
    cfg.update(over)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_engine_concurrency_no_workload_reaches_is_an_error(tmp_path: Path) -> None:
    path = _bad(
        tmp_path,
        backend="openai",
        server={"url": "http://127.0.0.1:9", "gamma": 0},
        workloads=[{"name": "c", "dataset": {"name": "tiny_code"}, "n": 4}],
        concurrency=[1, 8],
    )
    res = runner.invoke(app, ["validate", str(path), "--offline"])
    assert res.exit_code == 2
    assert "concurrency 8: no workload has more than 4 prompts" in res.stderr


def test_fewer_prompts_than_asked_is_a_warning_and_strict_fails(tmp_path: Path) -> None:
    path = _bad(tmp_path, workloads=[{"name": "c", "dataset": {"name": "tiny_code"}, "n": 500}])
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 0 and "asks for 500 prompts, its dataset has" in res.stderr
    res = runner.invoke(app, ["validate", str(path), "--strict"])
    assert res.exit_code == 2 and "(--strict)" in res.stderr


@pytest.mark.parametrize("args", [["schema", "--help"], ["roi", "--alpha", "0.6"]])
def test_a_closed_output_pipe_stops_quietly_with_141(args: list[str]) -> None:
    """`specbench … | head`: the reader is gone before the command writes (the pipe is closed
    before the interpreter has even imported specbench), so its first write fails with EPIPE.
    Not a fault and not a verdict: no line on stderr, exit 141 (128 + SIGPIPE), not 1 or 3."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "specbench", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, err
    assert err == b""
