"""`specbench canary --once` on a direct `/metrics` scrape (`sources.metrics`) of engine stand-ins
on 127.0.0.1, vLLM-style and SGLang-style (tests/harness/canary_servers.py): each look is a fresh
command that reads the saved scrape snapshots and state, so this is the restart a cron job makes.
The first look saves a scrape and decides nothing; each later one appends one window pair (what
grew since the last saved scrape), never rewriting a saved line; the built-in names of each
engine fill the windows (SGLang: no acceptance counters, so no acceptance guard)."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.cli.app import app
from tests.harness.canary_servers import Engine, Plant, Traffic

runner = CliRunner(env={"COLUMNS": "140", "NO_COLOR": "1"})
LOOKS = 5


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_once_on_a_scrape_resumes_from_the_saved_snapshots(tmp_path: Path, engine: str) -> None:
    canary, control = Engine(Plant(speculative=True), engine), Engine(Plant(), engine)
    cfg = tmp_path / "canary.yaml"
    cfg.write_text(
        f"""guards:
  tpot: {{slo_ms: 50}}
  acceptance: {{buckets: [all]}}
sources:
  metrics:
    engine: {engine}
    canary: ["http://{canary.address}/metrics"]
    control: ["http://{control.address}/metrics"]
state: state.jsonl
""",
        encoding="utf-8",
    )
    state, scrapes = tmp_path / "state.jsonl", tmp_path / "state.jsonl.scrapes.jsonl"
    docs, saved = [], []
    try:
        with Traffic([(canary, control)], rate_per_s=60):
            for look in range(LOOKS):
                time.sleep(1.0)
                r = runner.invoke(app, ["canary", str(cfg), "--once", "--json"])
                assert r.exit_code in (0, 10, 11), r.output
                docs.append(json.loads(r.stdout))
                lines = state.read_text().splitlines() if state.exists() else []
                assert lines[: len(saved)] == saved  # never rewritten
                saved = lines
                assert len(scrapes.read_text().splitlines()) == look + 1
    finally:
        canary.close()
        control.close()
    assert [d["windows"] for d in docs] == list(range(LOOKS))
    windows = [json.loads(x) for x in saved]
    assert [w["seq"] for w in windows] == list(range(LOOKS - 1))
    for a, b in itertools.pairwise(windows):
        assert a["end"] == b["start"]  # each window starts at the scrape the previous one ended
    for w in windows:
        assert w["source"] == "metrics"
        for arm in (w["canary"], w["control"]):
            assert arm["requests"] > 0 and arm["center"] == "mean"
            assert 10 < arm["tpot_ms"] < 100 and arm["e2e_ms"] > 0 and arm["output_tokens"] > 1
    accept = [g for g in docs[-1]["guards"] if g["key"].startswith("acceptance")]
    if engine == "vllm":
        assert windows[-1]["canary"]["acceptance"]["all"]["proposed"] > 0
        assert accept and accept[0]["windows"] == LOOKS - 1
    else:
        assert windows[-1]["canary"]["acceptance"] == {}
        assert all(g["windows"] == 0 for g in accept)
