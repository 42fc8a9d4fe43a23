"""`specbench schedule`'s formats (report/schedule/schedule_export.py, docs/schedule.md): each engine's file
read back gives the schedule's k at every batch size; schedules an engine cannot take are one
error line; the command end to end on a synthetic engine run, and its bad input."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from specbench.analysis.decide.gamma_schedule import OPEN_END, gamma_at
from specbench.cli.app import app
from specbench.errors import SpecbenchError
from specbench.report.schedule import schedule_export as ex
from tests.unit.synthetic import baseline_record, spec_record
from tests.unit.test_engine_metrics import _minimal, synthetic_engine_run

RANGES = [[1, 3, 4], [4, 11, 2], [12, 40, 1], [41, OPEN_END, 0]]
runner = CliRunner(env={"COLUMNS": "80", "NO_COLOR": "1"})


def test_vllm_config_round_trips_and_keeps_the_run_options() -> None:
    base = {"method": "draft_model", "model": "d", "num_speculative_tokens": [2, 4]}
    conf = json.loads(json.dumps(ex.vllm_speculative_config(RANGES, base)))
    assert conf["method"] == "draft_model" and conf["model"] == "d"
    assert conf["num_speculative_tokens"] == 4  # vLLM clamps every k to it: the largest k
    assert conf["num_speculative_tokens_per_batch_size"] == RANGES


def test_trtllm_schedule_round_trips_through_its_lookup() -> None:
    """Keys are range upper ends (TensorRT-LLM at the recorded commit): the smallest maps to
    max_draft_len and the trailing off range needs no key (past the last key k = 0)."""
    opts = yaml.safe_load(yaml.safe_dump(ex.trtllm_options(RANGES)))
    spec = opts["speculative_config"]
    assert spec["max_draft_len"] == 4 and spec["draft_len_schedule"] == {3: 4, 11: 2, 40: 1}
    for b in [*range(1, 200), 5000, OPEN_END]:
        assert ex.trtllm_draft_len(spec["draft_len_schedule"], b) == gamma_at(RANGES, b), b


def test_engines_refuse_what_they_cannot_take() -> None:
    with pytest.raises(SpecbenchError, match="batch 1 to be the largest"):
        ex.trtllm_options([[1, 3, 2], [4, OPEN_END, 4]])
    for write in (ex.trtllm_options, lambda r: ex.vllm_speculative_config(r, None)):
        with pytest.raises(SpecbenchError, match="off at every measured concurrency"):
            write([[1, OPEN_END, 0]])


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    recs = synthetic_engine_run()
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    cfg = {**_minimal(), "name": "eng", "concurrency": [1, 8], "decision": {"bootstrap": 300}}
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    return run


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_schedule_command_writes_json_and_trtllm(tmp_path: Path) -> None:
    """γ = 3 halves TPOT at concurrency 1 and is 5 % slower at 8: on at 1, off at 8."""
    run = _run_dir(tmp_path)
    out = tmp_path / "s.json"
    res = runner.invoke(app, ["schedule", str(run), "--format", "json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["schedule"][0][:1] == [1] and doc["schedule"][0][2] == 3
    assert doc["schedule"][-1][2] == 0 and doc["schedule"][-1][1] == OPEN_END
    assert [m["gamma"] for m in doc["measured"]] == [3, 0]
    assert doc["provenance"]["run"] == "eng" and doc["false_on_rate"] == 0.025
    res = runner.invoke(app, ["schedule", str(run), "--format", "trtllm"])
    assert res.exit_code == 0
    spec = yaml.safe_load(res.stdout)["speculative_config"]
    assert spec["max_draft_len"] == 3
    assert ex.trtllm_draft_len(spec["draft_len_schedule"], 1) == 3
    assert ex.trtllm_draft_len(spec["draft_len_schedule"], 8) == 0


def _one_error_line(res: object, needle: str) -> None:
    assert res.exit_code == 2  # type: ignore[attr-defined]
    lines = [x for x in res.output.splitlines() if x.strip()]  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], lines


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_bad_run_dirs_and_choices_are_one_line(tmp_path: Path) -> None:
    _one_error_line(runner.invoke(app, ["schedule", str(tmp_path / "nope")]), "not found")
    run = _run_dir(tmp_path)
    _one_error_line(runner.invoke(app, ["schedule", str(run), "--workload", "x"]), "'x'")
    _one_error_line(
        runner.invoke(app, ["schedule", str(run), "--temperature", "0.7"]), "not measured"
    )
    _one_error_line(runner.invoke(app, ["schedule", str(run), "--format", "nginx"]), "nginx")
    # SGLang takes one γ per server: a schedule that changes k needs the operating concurrency
    _one_error_line(
        runner.invoke(app, ["schedule", str(run), "--format", "sglang"]), "give --concurrency"
    )
    # off at the operating concurrency is an answer: SGLang's launch line without speculation
    res = runner.invoke(app, ["schedule", str(run), "--format", "sglang", "--concurrency", "8"])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "python -m sglang.launch_server --model-path t"
    assert "# serve without speculation: the schedule is off at concurrency 8" in res.stderr
    # one concurrency only: no schedule to write
    one = tmp_path / "one"
    one.mkdir()
    recs = [r for r in synthetic_engine_run() if r["concurrency"] == 1]
    (one / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (one / "config.yaml").write_text(yaml.safe_dump({**_minimal(), "concurrency": [1]}))
    _one_error_line(runner.invoke(app, ["schedule", str(one)]), "one concurrency only")
    # a transformers run (batch 1, no engine section): no concurrency data
    flat = tmp_path / "flat"
    flat.mkdir()
    rng = np.random.default_rng(0)
    recs = [baseline_record(f"p{i}", 10.0) for i in range(4)]
    recs += [spec_record(rng, f"p{i}", 2, [0.8, 0.7], 20) for i in range(4)]
    (flat / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (flat / "config.yaml").write_text(yaml.safe_dump({**_minimal(), "backend": "transformers"}))
    _one_error_line(runner.invoke(app, ["schedule", str(flat)]), "no concurrency data")


@pytest.mark.slow  # seconds, not milliseconds: make test runs it, make test-fast does not
def test_engine_report_has_the_schedule_section_and_plot(tmp_path: Path) -> None:
    from specbench.cli.report import write_reports

    run = _run_dir(tmp_path)
    results, _ = write_reports(run)
    md = (run / "report.md").read_text()
    assert "### γ schedule by concurrency: w (T = 0)" in md
    engine = results.workloads[0].engine
    assert engine is not None and engine.schedule is not None
    sched = engine.schedule
    lo_k = sched.ranges[0][2]
    s = sched.boundaries[0].at
    assert lo_k == 3 and f"schedule [lo, hi, k]: 1–{s - 1}: γ=3; {s}+: off" in md
    assert "leave-one-out" in md
    assert (run / "plots" / "schedule_w_T0.png").stat().st_size > 0


# --- off at every measured concurrency: the line without speculation (report/schedule/schedule_off.py) ---


def _scaled_run(tmp_path: Path, name: str, factor: Any) -> Path:
    """The synthetic engine run with every speculative request's e2e set to its paired
    baseline's × factor(prompt index): factor > 1 is slower than off (throughput ratio 1/factor)."""
    run = tmp_path / name
    run.mkdir()
    recs = synthetic_engine_run()
    base = {(r["prompt_id"], r["concurrency"]): r["e2e_ms"][0] for r in recs if r["kind"] == "baseline"}  # fmt: skip
    for r in recs:
        if r["kind"] == "spec":
            e2e = base[(r["prompt_id"], r["concurrency"])] * factor(int(r["prompt_id"][1:]))
            r["wall_ms"] = r["e2e_ms"][0] = e2e
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    env = {"backend": "vllm", "engine_args": {"model": "org/target", "tensor_parallel_size": 2}}
    (run / "env.json").write_text(json.dumps(env))
    cfg = {**_minimal(), "name": "eng", "concurrency": [1, 8], "decision": {"bootstrap": 300}}
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    return run


def _exports(run: Path) -> dict[str, Any]:
    out = {}
    for fmt in ("vllm", "sglang", "trtllm"):
        res = runner.invoke(app, ["schedule", str(run), "--format", fmt])
        assert res.exit_code == 0, (fmt, res.output)
        out[fmt] = res
    return out


@pytest.mark.slow  # seconds: make test, not the fast lane (tests/README.md)
def test_off_everywhere_is_the_line_without_speculation(tmp_path: Path) -> None:
    """γ = 3 at 1.6× the baseline's e2e on every prompt (ratio 0.625): every interval lies below
    1.05, OFF, shown not to pay; each format writes the plain server, exit 0."""
    res = _exports(_scaled_run(tmp_path, "off", lambda i: 1.6))
    assert res["vllm"].stdout.strip() == "vllm serve org/target --tensor-parallel-size 2"
    # the measured tensor parallel 2 in each engine's own key (report/schedule/parallel_layout.py)
    plain = "python -m sglang.launch_server --model-path org/target --tp-size 2"
    assert res["sglang"].stdout.strip() == plain
    assert yaml.safe_load(res["trtllm"].stdout) == {"tensor_parallel_size": 2}  # no spec config
    assert "trtllm-serve org/target" in res["trtllm"].stderr
    assert "it holds the measured layout" in res["trtllm"].stderr
    for r in res.values():
        first = r.stderr.splitlines()[0]
        assert first.startswith("# serve without speculation — OFF, shown not to pay"), first
        assert "every γ's interval lies below 1.05" in first and "false OFF ≤ 2.5%" in first


@pytest.mark.slow
def test_not_shown_to_pay_is_undecided_with_what_would_decide_it(tmp_path: Path) -> None:
    """γ = 3 at the baseline's speed on average but ±50 % per prompt (seeded): no lower bound
    clears 1.05 and some interval reaches above it — UNDECIDED, the plain line all the same."""
    noise = np.random.default_rng(7).lognormal(0.0, 0.5, size=12)
    res = _exports(_scaled_run(tmp_path, "undecided", lambda i: float(noise[i])))
    assert "--speculative-config" not in res["vllm"].stdout
    first = res["vllm"].stderr.splitlines()[0]
    assert first.startswith("# serve without speculation — UNDECIDED, not shown to pay"), first
    assert "would decide it" in first and "γ=3 at concurrency" in first


@pytest.mark.slow
def test_on_somewhere_still_writes_the_speculative_config(tmp_path: Path) -> None:
    """The synthetic run (γ = 3 halves TPOT at concurrency 1): ON there, so the export carries
    --speculative-config and no off line."""
    run = _scaled_run(tmp_path, "on", lambda i: 0.5)
    res = runner.invoke(app, ["schedule", str(run), "--format", "vllm"])
    assert res.exit_code == 0, res.output
    argv = shlex.split(res.stdout)
    assert argv[:5] == ["vllm", "serve", "org/target", "--tensor-parallel-size", "2"]
    assert json.loads(argv[argv.index("--speculative-config") + 1])["num_speculative_tokens"] == 3
    assert "serve without speculation" not in res.stderr
