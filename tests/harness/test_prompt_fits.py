"""Prompts are checked against a server's max_model_len (from /v1/models) before they are sent:
one that does not fit is a failed unit saying why, and the server never sees it (issue 32: a
1 MB prompt went to a server whose max_model_len is 1024)."""

from __future__ import annotations

import json
from pathlib import Path

from specbench.config import parse_config
from specbench.harness.serving.drive.driver import run_engine
from specbench.records import read_records
from tests.fault_server import FaultServer


def test_a_prompt_longer_than_max_model_len_is_not_sent(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    long_text = "def f(x):\n    return x + 1\n" * 400  # thousands of tokens
    prompts.write_text(
        json.dumps({"id": "short", "prompt": "def add(a, b):"})
        + "\n"
        + json.dumps({"id": "long", "prompt": long_text + "MARKER_LONG"})
        + "\n"
    )
    with FaultServer(max_model_len=256, lifetime_s=60.0) as srv:
        cfg = {
            "name": "fits",
            "backend": "openai",
            "target": {"model": "tiny-target"},  # the tokenizer the prompts are counted with
            "server": {
                "url": srv.url,
                "gamma": 0,
                "retries": 0,
                "timeout_s": 5.0,
                "model": "fault",
                "prompt_format": "text",
            },
            "workloads": [{"name": "w", "dataset": {"path": str(prompts)}}],
            "sampling": {"temperatures": [0.0]},
            "concurrency": [1],
            "max_new_tokens": 6,
            "warmup": 0,
            "output_dir": str(tmp_path / "out"),
            "keep_text": True,  # the records by their ids "short" / "long" (docs/privacy.md)
        }
        outcome = run_engine(parse_config(cfg, "test"), tmp_path / "out")
        sent = [json.dumps(entry["body"]) for entry in srv.log]
    recs = {
        r["prompt_id"]: r
        for r in read_records(tmp_path / "out" / "records.jsonl")
        if r["kind"] != "engine_metrics"
    }
    assert recs["short"]["status"] == "ok"
    assert recs["long"]["status"] == "failed"
    assert "does not fit the server's max_model_len" in recs["long"]["error"]
    assert "(250 tokens)" in recs["long"]["error"]  # 256 less max_tokens 6
    assert len(outcome.failures) == 1
    assert sent and not any("MARKER_LONG" in body for body in sent)
