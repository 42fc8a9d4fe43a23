"""`backend: openai` under load (tests/load_server.py, 127.0.0.1): closed loop beside open-loop
Poisson rates and a replayed trace, per-cell p50/p99 and SLO goodput in records, results.json,
load_summary.csv and the report; buffered streams flagged (and honest ones not); a rate the
server cannot sustain ends its batch at the time bound; kill -9 mid open-loop batch, then
`--resume`, reruns that batch whole."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from specbench.cli.report import write_reports
from specbench.config import parse_config
from specbench.harness.serving.drive.driver import run_engine
from specbench.records import read_records
from tests.load_server import LoadServer

REPO = Path(__file__).resolve().parents[2]
N = 8  # prompts per workload


def config(tmp_path: Path, endpoints: list[dict[str, Any]], **over: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "name": "load",
        "backend": "openai",
        "target": {"model": "load"},
        "server": {"endpoints": endpoints, "timeout_s": 10.0, "retries": 0},
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": N}],
        "sampling": {"temperatures": [0.0]},
        "concurrency": [1, 4],
        "max_new_tokens": 8,
        "warmup": 0,
        "output_dir": str(tmp_path / "out"),
    }
    cfg.update(over)
    return cfg


def requests(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in recs if r["kind"] in ("baseline", "spec", "failed")]


def cells_of(results: dict[str, Any]) -> dict[tuple[int, str, int | None], dict[str, Any]]:
    eng = results["workloads"][0]["engine"]
    return {(c["gamma"], c["load"], c["concurrency"]): c for c in eng["load"]}


def run_cli(
    cfg_path: Path, *extra: str, timeout: float = 240.0
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(cfg_path), *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_closed_and_two_open_loop_rates_end_to_end(tmp_path: Path) -> None:
    """`python -m specbench run` with a baseline and a γ=2 server, closed loop c=1, 4 and
    Poisson rates 20 and 40 /s, an SLO: every cell has p50/p99 with intervals and SLO goodput."""
    with LoadServer() as base, LoadServer(step_s=0.002) as spec:
        cfg = config(
            tmp_path,
            [{"url": base.url, "gamma": 0}, {"url": spec.url, "gamma": 2, "label": "fast"}],
            load={"rates": [20, 40], "max_in_flight": 6},
            slo={"ttft_ms": 1000, "tpot_ms": 1000},
        )
        path = tmp_path / "cfg.yaml"
        path.write_text(yaml.safe_dump(cfg))
        proc = run_cli(path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert max(base.max_in_flight, spec.max_in_flight) <= 6  # bounded in flight
    out = tmp_path / "out"
    recs = read_records(out / "records.jsonl")
    reqs = requests(recs)
    loads = Counter((r["gamma"], r.get("load", "closed"), r["concurrency"]) for r in reqs)
    for g in (0, 2):
        assert loads[(g, "closed", 1)] == N and loads[(g, "closed", 4)] == N
        assert loads[(g, "rate=20", 6)] == N and loads[(g, "rate=40", 6)] == N
    open_reqs = [r for r in reqs if r.get("load")]
    assert all(r["queue_ms"] >= 0 and r["arrival_s"] >= 0 and r["attempt"] for r in open_reqs)
    # honest streams: the per-request rule reads chunk timing, so a request stalled on a busy
    # machine may look buffered; the cell's flag (≥ half its requests) is the decision
    assert sum(r["buffered"] for r in reqs) <= len(reqs) // 8
    # the same arrival times at every setting (paired by the seeded schedule)
    arr = {(r["gamma"], r["load"], r["prompt_id"]): r["arrival_s"] for r in open_reqs}
    assert all(arr[(0, ld, p)] == arr[(2, ld, p)] for (g, ld, p) in arr if g == 0)
    metrics = [r for r in recs if r["kind"] == "engine_metrics" and r.get("load")]
    assert len(metrics) == 4 and all(m["not_sent"] == 0 and not m["hit_bound"] for m in metrics)

    results = json.loads((out / "results.json").read_text())
    cells = cells_of(results)
    assert set(cells) == {
        (g, ld, c)
        for g in (0, 2)
        for ld, c in (("closed", 1), ("closed", 4), ("rate=20", None), ("rate=40", None))
    }
    for c in cells.values():
        assert c["n"] == N and c["n_failed"] == 0
        for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
            p50 = c[m]["p50"]
            assert p50["ci95"][0] <= p50["value"] <= p50["ci95"][1]
            assert c[m]["p99"]["value"] is None  # 8 requests: no p99 value, and no upper end
            assert c[m]["p99"]["ci95"][1] is None
        gp = c["goodput"]
        assert gp["good"] == N  # a 1 s SLO: every request meets it
        assert gp["requests_per_s"]["value"] == pytest.approx(c["requests_per_s"])
    assert cells[(0, "rate=20", None)]["offered_rate"] > 0
    rows = list(csv.DictReader((out / "load_summary.csv").open()))
    assert len(rows) == len(cells) and rows[0]["ttft_ms_p50"] and rows[0]["goodput_requests_per_s"]
    report = (out / "report.md").read_text()
    assert "latency tails and SLO goodput per load" in report
    assert "rate=40" in report and "SLO: TTFT ≤ 1000 ms, TPOT ≤ 1000 ms" in report


def test_buffered_stream_is_flagged_and_an_honest_one_is_not(tmp_path: Path) -> None:
    with LoadServer("stream") as honest, LoadServer("buffered") as gateway:
        cfg = config(
            tmp_path,
            [{"url": honest.url, "gamma": 0}, {"url": gateway.url, "gamma": 2, "label": "gw"}],
            concurrency=[2],
            max_new_tokens=12,
        )
        run_engine(parse_config(cfg, "test"), tmp_path / "out")
    reqs = requests(read_records(tmp_path / "out" / "records.jsonl"))
    # per request the rule reads chunk timing (a stall on a busy machine can flip one); the
    # cell's flag, at least half its requests, is the decision and must be right
    assert sum(r["buffered"] for r in reqs if r["gamma"] == 2) >= 6
    assert sum(r["buffered"] for r in reqs if r["gamma"] == 0) <= 2
    assert all(r["chunks"] == [12] for r in reqs)  # one event per token either way
    write_reports(tmp_path / "out")
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    cells = cells_of(results)
    assert cells[(2, "closed", 2)]["tpot_meaningless"]
    assert not cells[(0, "closed", 2)]["tpot_meaningless"]
    warnings = " ".join(results["workloads"][0]["warnings"])
    assert re.search(r"gw c=2: [678]/8 responses arrived buffered", warnings)
    assert "TPOT (buffered)" not in warnings
    assert "(buffered)" in (tmp_path / "out" / "report.md").read_text()


def test_a_rate_the_server_cannot_sustain_ends_at_the_time_bound(tmp_path: Path) -> None:
    """60 ms per token × 8 tokens, 40 requests/s, at most 2 in flight, 1 s bound: the batch stops
    at the bound with requests not sent, says so, and the run ends normally."""
    with LoadServer(step_s=0.06) as slow:
        cfg = config(
            tmp_path,
            [{"url": slow.url, "gamma": 0}],
            concurrency=[1],
            load={"rates": [40], "max_in_flight": 2, "max_duration_s": 1.0},
        )
        outcome = run_engine(parse_config(cfg, "test"), tmp_path / "out")
    recs = read_records(tmp_path / "out" / "records.jsonl")
    (m,) = [r for r in recs if r["kind"] == "engine_metrics" and r.get("load")]
    assert m["hit_bound"] and m["not_sent"] > 0 and m["n_sent"] + m["not_sent"] == N
    assert m["waited_for_slot"] > 0
    assert any("does not sustain this load" in w for w in outcome.warnings)
    assert not outcome.failures  # requests cut at the bound are the load's result, not failures
    write_reports(tmp_path / "out")
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    cell = cells_of(results)[(0, "rate=40", None)]
    assert cell["hit_bound"] and cell["not_sent"] == m["not_sent"]


def test_trace_replay_sends_at_the_logged_offsets(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    stamps = [100.0, 100.05, 100.3, 100.31, 100.5]  # 5 requests: fewer than the 8 prompts
    trace.write_text("".join(json.dumps({"timestamp": t}) + "\n" for t in stamps))
    with LoadServer() as srv:
        cfg = config(tmp_path, [{"url": srv.url, "gamma": 0}], concurrency=[1])
        cfg["load"] = {"trace": str(trace), "trace_speed": 2.0}
        run_engine(parse_config(cfg, "test"), tmp_path / "out")
    reqs = [r for r in requests(read_records(tmp_path / "out" / "records.jsonl")) if r.get("load")]
    assert {r["load"] for r in reqs} == {"trace"} and len(reqs) == len(stamps)
    got = sorted(r["arrival_s"] for r in reqs)
    assert got == pytest.approx([(t - 100.0) / 2.0 for t in stamps])


def test_unreachable_concurrency_is_warned_and_stored(tmp_path: Path) -> None:
    """A level one workload's prompts cannot fill (another's can: a level none can reach is an
    error, tests/harness/test_engine_methods.py) is run, warned about and labelled effective."""
    workloads = [
        {"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": N},
        {"name": "tiny_prose", "dataset": {"name": "tiny_prose"}, "n": 2},
    ]
    with LoadServer() as srv:
        cfg = config(tmp_path, [{"url": srv.url, "gamma": 0}], concurrency=[2, 4])
        cfg["workloads"] = workloads
        outcome = run_engine(parse_config(cfg, "test"), tmp_path / "out")
    note = "workload 'tiny_prose' has 2 prompts: concurrency 4 cannot be reached (effective concurrency 2)"
    assert note in outcome.warnings
    env = json.loads((tmp_path / "out" / "env.json").read_text())
    assert env["load_warnings"] == [note]
    write_reports(tmp_path / "out")
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    prose = next(e for e in results["workloads"] if e["workload"] == "tiny_prose")
    cells = {(c["gamma"], c["load"], c["concurrency"]): c for c in prose["engine"]["load"]}
    assert cells[(0, "closed", 4)]["effective_concurrency"] == 2
    assert "closed c=4 (effective 2)" in (tmp_path / "out" / "report.md").read_text()


def test_killed_open_loop_batch_is_rerun_whole_on_resume(tmp_path: Path) -> None:
    """What kill -9 mid open-loop batch leaves (records are appended and fsynced as produced:
    a prefix of the file, here cut after the third open-loop request), then `--resume`: the
    batch runs again whole under a new attempt, and the analysis keeps only that attempt. (The
    kill itself, through `python -m specbench`, is tests/harness/test_fault_server.py's.)"""
    with LoadServer() as srv:
        cfg = parse_config(
            config(tmp_path, [{"url": srv.url, "gamma": 0}], concurrency=[4], load={"rates": [30]}),
            "test",
        )
        out = tmp_path / "out"
        run_engine(cfg, out)
        records = out / "records.jsonl"
        lines = records.read_text().splitlines(keepends=True)
        first_open = next(i for i, ln in enumerate(lines) if '"load": "rate=30"' in ln)
        records.write_text("".join(lines[: first_open + 3]))  # killed in the open-loop batch
        killed = {r["attempt"] for r in requests(read_records(records)) if r.get("load")}
        assert len(killed) == 1
        run_engine(cfg, out, resume=True)
    recs = read_records(records)
    (m,) = [r for r in recs if r["kind"] == "engine_metrics" and r.get("load")]
    assert m["attempt"] not in killed
    rerun = [r for r in requests(recs) if r.get("attempt") == m["attempt"]]
    assert len(rerun) == N  # the whole batch again, not its rest
    closed = Counter(r["prompt_id"] for r in requests(recs) if not r.get("load"))
    assert len(closed) == N and set(closed.values()) == {1}  # the closed loop not rerun
    write_reports(out)
    results = json.loads((out / "results.json").read_text())
    assert cells_of(results)[(0, "rate=30", None)]["n"] == N  # the killed attempt left out
