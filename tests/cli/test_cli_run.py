"""`specbench run` and `specbench report` end to end on the tiny pair, and their bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli import app

runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


def write_config(tmp_path: Path, **over: object) -> Path:
    cfg = {
        "name": "cli",
        "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
        "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
        "workloads": [
            {"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 3},
            {"name": "tiny_prose", "dataset": {"name": "tiny_prose"}, "n": 3},
        ],
        "sampling": {"temperatures": [0.0]},
        "gammas": [1, 2, 4],
        "max_new_tokens": 12,
        "warmup": 0,
        "output_dir": str(tmp_path / "out"),
    }
    cfg.update(over)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("run")
    res = runner.invoke(
        app, ["run", str(write_config(tmp)), "--temperature", "0", "--temperature", "1"]
    )
    assert res.exit_code == 0, res.output
    assert "Decision: one speculative configuration per server" in res.output
    return tmp / "out"


def test_run_writes_every_output(finished_run: Path) -> None:
    for name in (
        "records.jsonl",
        "config.yaml",
        "env.json",
        "results.json",
        "summary.csv",
        "report.md",
        "report.html",
    ):
        assert (finished_run / name).stat().st_size > 0, name
    results = json.loads((finished_run / "results.json").read_text())
    entries = results["workloads"]
    assert {(e["workload"], e["temperature"]) for e in entries} == {
        ("tiny_code", 0.0), ("tiny_code", 1.0), ("tiny_prose", 0.0), ("tiny_prose", 1.0),
    }  # fmt: skip
    for e in entries:
        assert 0.0 <= e["alpha"]["value"] <= 1.0 and e["alpha"]["estimator"] == "exact_beta"
        lo, hi = e["alpha"]["ci95"]
        assert lo <= e["alpha"]["value"] <= hi
        assert e["baseline_itl_ms"]["value"] > 0
        assert [g["gamma"] for g in e["gammas"]] == [1, 2, 3, 4]
        measured = [g for g in e["gammas"] if g["measured"]]
        assert [g["gamma"] for g in measured] == [1, 2, 4]
        assert all(g["measured_speedup"]["value"] > 0 for g in measured)
        assert e["recommendation"]["verdict"] in ("on", "off")
        assert (e["recommendation"]["gamma"] == 0) == (e["recommendation"]["verdict"] == "off")
    csv_lines = (finished_run / "summary.csv").read_text().strip().splitlines()
    assert len(csv_lines) == 1 + 4 * 4
    assert len(list((finished_run / "plots").glob("*.png"))) >= 3 + 2 * 4


def test_report_regenerates_results_identically(finished_run: Path) -> None:
    before = (finished_run / "results.json").read_text()
    res = runner.invoke(app, ["report", str(finished_run)])
    assert res.exit_code == 0, res.output
    assert (finished_run / "results.json").read_text() == before
    html = (finished_run / "report.html").read_text()
    results = json.loads(before)
    for e in results["workloads"]:
        assert e["workload"] in html
    assert html.count("data:image/png;base64,") >= 3 + 2 * 4
    assert ("<td>ON</td>" in html) or ("<td>OFF</td>" in html)


def test_report_bad_inputs(tmp_path: Path, finished_run: Path) -> None:
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "has no records.jsonl" in res.stderr
    copy = tmp_path / "copy"
    copy.mkdir()
    lines = (finished_run / "records.jsonl").read_text().splitlines()
    (copy / "records.jsonl").write_text("\n".join(lines) + "\n" + lines[-1][:40])
    (copy / "config.yaml").write_text((finished_run / "config.yaml").read_text())
    res = runner.invoke(app, ["report", str(copy)])
    assert res.exit_code == 0 and "truncated" in res.output
    newer = json.loads(lines[0]) | {"schema": 99}
    (copy / "records.jsonl").write_text(json.dumps(newer) + "\n")
    res = runner.invoke(app, ["report", str(copy)])
    assert res.exit_code == 2 and "schema version 99" in res.stderr


@pytest.mark.parametrize(
    ("over", "args", "needle"),
    [
        ({"gammas": [0, 2]}, [], "gammas must all be in [1, 64]"),
        ({}, ["--gammas", "0,1"], "gammas must all be in [1, 64]"),
        ({}, ["--temperature", "-0.5"], "temperatures must be in [0, 100]"),
        ({"sampling": {"top_p": 1.5}}, [], "top_p must be in (0, 1]"),
        ({"target": {"model": "./no/such/model"}}, [], "model directory not found"),
        ({"gamas": [1]}, [], "did you mean 'gammas'"),
        ({}, ["--workloads", "nope"], "unknown workload 'nope'"),
        ({"workloads": [{"name": "x", "dataset": {"path": "missing.jsonl"}}]}, [], "missing.jsonl"),
    ],
)
def test_run_bad_input_one_line_exit_2(
    tmp_path: Path, over: dict, args: list[str], needle: str
) -> None:
    res = runner.invoke(app, ["run", str(write_config(tmp_path, **over)), *args])
    assert res.exit_code == 2, res.output
    assert needle in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.output


def test_run_refuses_a_directory_holding_another_run(finished_run: Path, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, output_dir=str(finished_run), gammas=[3])
    res = runner.invoke(app, ["run", str(cfg)])
    assert res.exit_code == 2 and "already holds a run" in res.stderr
    res = runner.invoke(app, ["run", str(cfg), "--resume"])
    assert res.exit_code == 2 and "different configuration" in res.stderr
