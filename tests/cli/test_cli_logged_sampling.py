"""`run` with `dataset.sampling: logged`: each request is generated at its own logged temperature,
top_p and max tokens (the config's where the row has none), baseline and speculative alike; the
mix is reported, and `report` / `--resume` work on such a run (the serving backends:
tests/harness/test_openai_backend.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli.app import app
from specbench.config import DatasetSpec, WorkloadSpec, parse_config
from specbench.data import load_workload
from specbench.errors import SpecbenchError
from tests.logged_requests import write_logged_requests

runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})

# what each request must be generated with: (temperature, top_p, max new tokens)
EXPECTED = {"a": (0.0, 1.0, 4), "b": (0.7, 0.9, 7), "c": (1.0, 0.95, 10), "d": (0.7, 0.5, 10)}


def _config(tmp: Path) -> Path:
    cfg = {
        "name": "logged",
        "target": {"model": "tiny-target", "dtype": "float32", "device": "cpu"},
        "draft": {"model": "tiny-draft", "dtype": "float32", "device": "cpu"},
        "workloads": [
            {
                "name": "logs",
                "dataset": write_logged_requests(tmp / "logs.jsonl"),
            }
        ],
        # the grid is not used by a logged workload (it runs once); its first value is the
        # fallback temperature
        "sampling": {"temperatures": [0.7, 0.0], "top_p": 0.95},
        "gammas": [1, 2],
        "max_new_tokens": 10,
        "warmup": 0,
        "output_dir": str(tmp / "out"),
        "keep_text": True,  # the records by logged id, and their token ids (docs/privacy.md)
    }
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("logged")
    res = runner.invoke(app, ["run", str(_config(tmp))])
    assert res.exit_code == 0, res.output
    return tmp, res.output


@pytest.mark.slow  # the module's run: about 10 s on a quiet machine
def test_each_request_is_generated_at_its_own_logged_settings(
    logged_run: tuple[Path, str],
) -> None:
    tmp, _ = logged_run
    records = [
        json.loads(line) for line in (tmp / "out" / "records.jsonl").read_text().splitlines()
    ]
    assert {r["kind"] for r in records} == {"baseline", "spec"}
    by_prompt: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_prompt.setdefault(r["prompt_id"], []).append(r)
    assert sorted(by_prompt) == sorted(EXPECTED)
    label = round(sum(t for t, _, _ in EXPECTED.values()) / len(EXPECTED), 4)  # 0.6
    for pid, recs in by_prompt.items():
        assert len(recs) == 3  # baseline, γ=1, γ=2: once, not per temperature of the grid
        t, p, m = EXPECTED[pid]
        for r in recs:  # baseline and speculative records of a prompt: the same parameters
            assert r["sampling"] == "logged" and r["temperature"] == label
            req = r["request"]
            assert (req["temperature"], req["top_p"], req["max_tokens"]) == (t, p, m)
            assert r["top_p"] == p
            assert r["new_tokens"] <= m
            # a request that ran to its length limit stopped at its own max tokens
            if r["stop_reason"][-1] == "max_new_tokens":
                assert r["new_tokens"] == m
        # greedy request: the speculative outputs equal the baseline's (lossless at T=0)
        if t == 0.0:
            base = next(r for r in recs if r["kind"] == "baseline")
            assert all(r["output_ids"] == base["output_ids"] for r in recs)


@pytest.mark.slow
def test_the_mix_is_reported_and_report_regenerates_it(logged_run: tuple[Path, str]) -> None:
    tmp, output = logged_run
    out = tmp / "out"
    results = json.loads((out / "results.json").read_text())
    (entry,) = results["workloads"]
    mix = entry["request_sampling"]
    assert mix["prompts"] == 4
    assert mix["temperature"] == {"0": 1, "0.7": 2, "1": 1}
    assert mix["top_p"] == {"0.5": 1, "0.9": 1, "0.95": 1, "1": 1}
    assert mix["max_tokens"] == {"min": 4, "median": 8.5, "max": 10}
    assert mix["from_config"] == {"temperature": 1, "top_p": 1, "max_tokens": 1}
    assert mix["max_tokens_capped"] == 1
    assert "logs: 4 requests as logged" in output and "T 0×1, 0.7×2, 1×1" in output
    before = (out / "results.json").read_text()
    res = runner.invoke(app, ["report", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "results.json").read_text() == before
    assert "4 requests as logged" in res.output
    # --resume on a finished logged run finds every unit done and writes nothing
    n_lines = len((out / "records.jsonl").read_text().splitlines())
    res = runner.invoke(app, ["run", str(tmp / "c.yaml"), "--resume"])
    assert res.exit_code == 0, res.output
    assert len((out / "records.jsonl").read_text().splitlines()) == n_lines


def test_bad_logged_values_and_misplaced_fields_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"prompt": "x", "temperature": "hot"}) + "\n")
    spec = DatasetSpec(path=str(path), sampling="logged")
    with pytest.raises(SpecbenchError, match=r"'temperature'.*must be a number"):
        load_workload(WorkloadSpec(name="w", dataset=spec), seed=0)
    path.write_text(json.dumps({"prompt": "x", "top_p": 0, "max_tokens": 3}) + "\n")
    with pytest.raises(SpecbenchError, match=r"top_p 'top_p' must be in \(0, 1\]"):
        load_workload(WorkloadSpec(name="w", dataset=spec), seed=0)
    path.write_text(json.dumps({"prompt": "x", "max_tokens": 2.5}) + "\n")
    with pytest.raises(SpecbenchError, match="whole number"):
        load_workload(WorkloadSpec(name="w", dataset=spec), seed=0)
    cfg = _config(tmp_path)
    data = yaml.safe_load(cfg.read_text())
    data["workloads"][0]["dataset"]["sampling"] = "config"
    cfg.write_text(yaml.safe_dump(data))
    res = runner.invoke(app, ["run", str(cfg)])
    assert res.exit_code == 2
    assert "temperature_field needs dataset.sampling: logged" in res.output
    data["workloads"][0]["dataset"]["sampling"] = "logged"
    data["backend"] = "openai"  # each request carries its own settings: none may override them
    data["server"] = {"extra_body": {"temperature": 0.5}}
    with pytest.raises(SpecbenchError, match=r"temperature, which server\.extra_body overrides"):
        parse_config(data)
