"""The profile's mix under steady-state load (docs/serving.md "The profile's mix") against
tests/load_server.py on 127.0.0.1: two workloads with 0.75 / 0.25 of the output tokens, one with
budget 16 (max_new_tokens) and one logged at max_tokens 2 — so the request shares are 3/11 and
8/11, far from the token shares. The drawn workloads follow the request shares within binomial noise,
every setting gets the same draws, records carry `mix`, results.json and the report show the
achieved token shares, an interrupted mix batch is re-run whole by `--resume`, and the
per-workload results do not see the mix's records. No timed assertions."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specbench.analysis.documents.results_model import RunEnv
from specbench.analysis.pipeline.results import build_results
from specbench.analysis.serving.mix_batches import mix_batches, without_mix
from specbench.cli.app import app
from specbench.cli.report import write_reports
from specbench.config import parse_config
from specbench.harness.run.rundir import load_run
from specbench.harness.serving.drive.driver import run_engine
from specbench.records import read_records
from tests.harness.test_load_openai import config, requests
from tests.load_server import LoadServer

TOKENS = {"tiny_code": 0.75, "logs": 0.25}
BUDGET = {"tiny_code": 16, "logs": 2}  # max_new_tokens; the logged rows' max_tokens
RATE = 250  # requests/s for 0.4 s: about 100 arrivals (seeded: the same count every run)
Z = 4.0  # a binomial bound at 4 standard errors: a correct draw falls outside it with p ≈ 6e-5


def logged_rows(path: Path) -> dict[str, Any]:
    """Four logged requests at max_tokens 2 (temperature: the config's first)."""
    rows = [
        {"id": f"l{i}", "request": {"prompt": f"question {i}:", "max_tokens": 2}} for i in range(4)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {
        "path": str(path),
        "prompt_field": "request.prompt",
        "sampling": "logged",
        "max_tokens_field": "request.max_tokens",
    }


def mix_config(tmp_path: Path, endpoints: list[dict[str, Any]], **over: Any) -> dict[str, Any]:
    cfg = config(
        tmp_path,
        endpoints,
        concurrency=[1],
        max_new_tokens=BUDGET["tiny_code"],
        keep_text=True,
        workloads=[
            {"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 8},
            {"name": "logs", "dataset": logged_rows(tmp_path / "logs.jsonl")},
        ],
        sampling={"temperatures": [0.0, 1.0]},
        # `requests` caps the steady closed loop's draws (by duration alone it prepares 10⁵)
        load={"rates": [RATE], "duration_s": 0.4, "requests": 150, "max_in_flight": 32},
        slo={"ttft_ms": 10_000},
        decision={"bootstrap": 200},  # the intervals' width is not under test: a quicker report
        profile={"traffic": {"workloads": TOKENS, "temperatures": {0.0: 0.5, 1.0: 0.5}}},
    )
    cfg.update(over)
    return cfg


def two_servers() -> tuple[LoadServer, LoadServer]:
    # two runs back to back (the resume test) outlast the default 120 s lifetime on a busy machine
    return (
        LoadServer(step_s=0.001, max_requests=2000, lifetime_s=900.0),
        LoadServer(step_s=0.001, max_requests=2000, lifetime_s=900.0),
    )


def endpoints(a: LoadServer, b: LoadServer) -> list[dict[str, Any]]:
    return [{"url": a.url, "gamma": 0}, {"url": b.url, "gamma": 2, "label": "b"}]


def binomial_bounds(n: int, p: float) -> tuple[float, float]:
    """The count of a Binomial(n, p) within Z standard errors of its mean."""
    sd = math.sqrt(n * p * (1 - p))
    return n * p - Z * sd, n * p + Z * sd


def test_the_mix_is_drawn_in_request_shares_the_same_at_every_setting(tmp_path: Path) -> None:
    a, b = two_servers()
    with a, b:
        cfg = mix_config(tmp_path, endpoints(a, b))
        outcome = run_engine(parse_config(cfg, "test"), tmp_path / "out")
    assert not outcome.failures
    recs = read_records(tmp_path / "out" / "records.jsonl")
    mixed = [r for r in requests(recs) if r.get("mix") == "profile"]
    # the open-loop part is the mix: no per-workload open-loop batch ran
    assert all(r.get("mix") == "profile" for r in requests(recs) if r.get("load"))
    metrics = [r for r in recs if r["kind"] == "engine_metrics" and r.get("mix") == "profile"]
    assert {(m["gamma"], m["load"]) for m in metrics} == {
        (g, load) for g in (0, 2) for load in ("rate=250", "steady c=1")
    }
    assert all(m["workload"] == "mix" and m["n_sent"] == m["n_planned"] for m in metrics)

    # the same draws, in the same order, at the same times, with the same sampling seeds
    def draws(g: int, load: str) -> list[tuple[Any, ...]]:
        return sorted(
            (r["draw"], r["workload"], r["temperature"], r["prompt_id"], r["seed"], r["arrival_s"])
            for r in mixed
            if r["gamma"] == g and r["load"] == load
        )

    base = draws(0, "rate=250")
    n = len(base)
    assert n >= 80 and base == draws(2, "rate=250")  # ≥ 80: the bounds below are apart
    # the closed loop sends as many as each server completes in 0.4 s (a loaded machine: a few):
    # the same draw at each index
    c0, c2 = draws(0, "steady c=1"), draws(2, "steady c=1")
    k = min(len(c0), len(c2))
    assert k >= 1 and [d[:5] for d in c0[:k]] == [d[:5] for d in c2[:k]]

    # request shares: 0.75/16 : 0.25/2 = 3 : 8 (not the token shares 3 : 1)
    p_code = (TOKENS["tiny_code"] / 16) / (TOKENS["tiny_code"] / 16 + TOKENS["logs"] / 2)
    assert p_code == pytest.approx(3 / 11)
    n_code = sum(d[1] == "tiny_code" for d in base)
    lo, hi = binomial_bounds(n, p_code)
    assert lo <= n_code <= hi
    assert not binomial_bounds(n, 0.75)[0] <= n_code  # the token share is far off
    # temperatures: half and half among the config-sampled workload; the logged one at its label
    code = [d for d in base if d[1] == "tiny_code"]
    lo, hi = binomial_bounds(len(code), 0.5)
    assert lo <= sum(d[2] == 1.0 for d in code) <= hi
    assert {d[2] for d in base if d[1] == "logs"} == {0.0}
    by_wl = {r["workload"]: r["new_tokens"] for r in mixed}
    assert by_wl == BUDGET  # each sent at its own budget
    assert max(Counter(d[3] for d in base).values()) > 1  # prompts drawn with replacement

    # results.json: the mix section with the achieved token shares beside the asked ones
    write_reports(tmp_path / "out")
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    mix = results["mix"]
    assert mix["token_shares"] == TOKENS
    assert mix["request_shares"] == pytest.approx({"tiny_code": 3 / 11, "logs": 8 / 11}, abs=1e-6)
    assert mix["mean_max_tokens"] == BUDGET
    cells = {(c["gamma"], c["load"]): c for c in mix["cells"]}
    assert set(cells) == {(g, x) for g in (0, 2) for x in ("rate=250", "steady c=1")}
    for (g, load), c in cells.items():
        window = [
            r
            for r in mixed
            if r["gamma"] == g and r["load"] == load and r["phase"] in ("steady", "drain")
        ]
        assert c["n"] == len(window) and c["steady"]["warmup_excluded"]["n"] > 0
        k = sum(r["workload"] == "tiny_code" for r in window)
        # every answer runs to its budget here, so the achieved share is 16k / (16k + 2(n − k))
        assert c["token_shares"]["tiny_code"] == pytest.approx(
            16 * k / (16 * k + 2 * (len(window) - k)), abs=1e-6
        )
        assert c["goodput"] is not None
        assert load != "rate=250" or c["steady"]["achieved_rate"] > 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "the profile's traffic mix under load" in report
    assert (
        "output-token shares achieved" in report and "asked tiny_code 75.0%, logs 25.0%" in report
    )

    # the analysis interface: one batch per setting × load point, warm-up excluded
    batches = mix_batches(recs)
    assert len(batches) == 4
    for bt in batches:
        assert all(q.phase in ("steady", "drain") for q in bt.requests)
        assert all(q.arrival_s >= bt.window_s[0] for q in bt.requests)
        assert all(q.ok and q.ttft_ms is not None for q in bt.requests)
        assert (bt.drafter, bt.setting) == (("", "baseline") if bt.gamma == 0 else ("b", "b γ=2"))
    (b0,) = [x for x in batches if x.gamma == 0 and x.load == "rate=250"]
    assert b0.rate == 250.0 and b0.drafter == "" and b0.kept_up in (None, "yes", "no")

    # per-workload results: the same with and without the mix's records
    records, config_doc, env, _ = load_run(tmp_path / "out")
    full = build_results(records, config_doc, RunEnv.model_validate(env))
    alone = build_results(without_mix(records), config_doc, RunEnv.model_validate(env))
    assert full.mix is not None and alone.mix is None
    assert full.workloads == alone.workloads and full.global_ == alone.global_
    assert all(
        c.load == "closed" for e in full.workloads for c in (e.engine.load or []) if e.engine
    )  # no mix request filed in a workload's load table


def test_an_interrupted_mix_batch_is_run_again_whole(tmp_path: Path) -> None:
    """A kill in the γ=2 rate batch (the records cut after some of its request lines, before its
    metrics line): `--resume` re-runs that batch whole under a new attempt, leaves the complete
    ones alone, and the analysis keeps only the completed attempt."""
    a, b = two_servers()
    with a, b:
        cfg = parse_config(mix_config(tmp_path, endpoints(a, b)), "test")
        run_engine(cfg, tmp_path / "out")
        path = tmp_path / "out" / "records.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        recs = [json.loads(x) for x in lines]
        (cut,) = [
            i
            for i, r in enumerate(recs)
            if r["kind"] == "engine_metrics" and r.get("mix") and r["gamma"] == 2
            if r["load"] == "rate=250"
        ]
        old = recs[cut]["attempt"]
        kept = [x for x in lines[:cut] if json.loads(x).get("attempt") != old]
        part = [x for x in lines[:cut] if json.loads(x).get("attempt") == old][:20]
        path.write_text("".join(kept + part))  # the later batches are lost too
        before = {r["attempt"] for r in map(json.loads, kept) if r.get("attempt")}
        outcome = run_engine(cfg, tmp_path / "out", resume=True)
    assert not outcome.failures
    recs = read_records(path)
    metrics = [r for r in recs if r["kind"] == "engine_metrics" and r.get("mix")]
    assert len(metrics) == 4  # one per setting × load point, none twice
    redone = [m for m in metrics if m["gamma"] == 2 and m["load"] == "rate=250"]
    assert len(redone) == 1 and redone[0]["attempt"] not in (old, *before)
    assert {m["attempt"] for m in metrics if m["gamma"] == 0} <= before  # not re-run
    assert sum(r.get("attempt") == old for r in recs) == 20  # the cut attempt stays as history
    batches = {(x.gamma, x.load): x for x in mix_batches(recs)}
    assert len(batches) == 4 and batches[(2, "rate=250")].attempt == redone[0]["attempt"]
    same = [(q.draw, q.workload, q.prompt_id) for q in batches[(2, "rate=250")].requests]
    assert same == [(q.draw, q.workload, q.prompt_id) for q in batches[(0, "rate=250")].requests]


def test_the_profiles_rates_without_a_steady_state_are_refused_by_run(tmp_path: Path) -> None:
    cfg = mix_config(tmp_path, [{"url": "http://127.0.0.1:9", "gamma": 0}])
    cfg["load"] = {"rates": [RATE]}
    cfg["profile"]["load"] = {"rates": [RATE]}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"}).invoke(app, ["run", str(path)])
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert (
        "the profile's load needs a steady state: set load.duration_s or load.requests" in lines[0]
    )
    assert not (tmp_path / "out").exists()
