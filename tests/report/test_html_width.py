"""report.html fits a 1366-px window (issue #19): measured in headless Chromium, on the shipped
demo run and on engine runs (the wide one has 5 γ × 4 concurrencies and long engine flags, whose
concurrency table is wider than any window). Skipped where /usr/bin/chromium is absent."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from specbench.analysis.serving.spec_counters import SpecCounters
from specbench.cli.report import write_reports
from tests.unit.test_engine_metrics import _metrics, _minimal, _req, synthetic_engine_run

CHROMIUM = Path("/usr/bin/chromium")
WINDOW = 1366
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium")

# writes the page's width into its title, which --dump-dom prints
PROBE = "<script>document.title='W='+document.documentElement.scrollWidth;</script>"


def page_width(html_path: Path, tmp_path: Path) -> int:
    probe = tmp_path / f"probe-{html_path.parent.name}.html"
    probe.write_text(html_path.read_text().replace("</body>", PROBE + "</body>"))
    out = subprocess.run(
        [
            str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
            f"--window-size={WINDOW},800", "--dump-dom", probe.as_uri(),
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    found = re.search(r"<title>W=(\d+)</title>", out.stdout)
    assert found, f"chromium printed no width: {out.stderr[-1000:]}"
    return int(found.group(1))


def _engine_dir(tmp_path: Path, name: str, recs: list[dict[str, Any]], **cfg: Any) -> Path:
    run = tmp_path / name
    run.mkdir()
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    config = {**_minimal(), "name": name, "decision": {"bootstrap": 200}, **cfg}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    return run


def wide_engine_run(tmp_path: Path) -> Path:
    """5 γ × 4 concurrencies (an 18-column concurrency table), long model paths in the flags,
    and the draft's memory as a vLLM engine reports it."""
    rng = np.random.default_rng(0)
    gammas, concs = [1, 2, 3, 4, 6], [1, 4, 16, 64]
    recs: list[dict[str, Any]] = []
    for i in range(12):
        j = float(rng.normal(0, 0.2))
        for c in concs:
            recs.append(_req("baseline", f"p{i}", 0, c, 10.0 + c / 8 + j))
            for g in gammas:
                per = tuple(float(10 - k) for k in range(g))
                cnt = SpecCounters(10, 10 * g, 6 * g, per) if c == 1 else None
                recs.append(_req("spec", f"p{i}", g, c, 6.0 + c / 4 + g / 3 + j, cnt))
    for c in concs:
        recs.append(_metrics(0, c, None, 100.0 * c))
        for g in gammas:
            per = tuple(float(120 - 5 * k) for k in range(g))
            recs.append(_metrics(g, c, SpecCounters(120, 120 * g, 72 * g, per), 110.0 * c))
    run = _engine_dir(
        tmp_path, "wide", recs, concurrency=concs, gammas=gammas,
        economics={"gpu_hour_usd": 2.5, "gpus": 4},
    )  # fmt: skip
    snapshot = "snapshots/" + "0123456789abcdef" * 2
    caps = [
        {"gamma": g, "label": "draft_model" if g else "", "endpoint": None,
         "tokens": 16 * (10_000 - 300 * g), "num_gpu_blocks": 10_000 - 300 * g, "block_size": 16}
        for g in [0, *gammas]
    ]  # fmt: skip
    env = {
        "backend": "vllm",
        "vllm": "0.32.0",
        "device": "cuda",
        "gpu": "NVIDIA H200",
        "engine_args": {
            "model": f"/home/someone/.cache/huggingface/hub/models--org--Target-70B/{snapshot}",
            "dtype": "bfloat16",
            "tensor_parallel_size": 4,
            "max_model_len": 8192,
            "gpu_memory_utilization": 0.9,
        },
        "speculative_config": {
            "method": "draft_model",
            "model": f"/home/someone/.cache/huggingface/hub/models--org--Draft-1B/{snapshot}",
            "num_speculative_tokens": gammas,
        },
        "memory": {"source": "engine", "target": None, "drafts": {}, "kv_capacity": caps},
    }
    (run / "env.json").write_text(json.dumps(env))
    return run


def test_reports_fit_a_1366_px_window(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    shutil.copytree(ROOT / "docs" / "example-run", demo)
    engine = _engine_dir(tmp_path, "engine", synthetic_engine_run(), concurrency=[1, 8], gammas=[3])
    wide = wide_engine_run(tmp_path)
    widths = {}
    for run in (demo, engine, wide):
        write_reports(run)
        widths[run.name] = page_width(run / "report.html", tmp_path)
    assert all(w <= WINDOW for w in widths.values()), widths
    # the wide report's figures are all there: the KV capacity line, the 18-column table
    md = (wide / "report.md").read_text()
    assert "γ=6 throughput ×" in md and "speculation takes 28,800 (18.0%)" in md
