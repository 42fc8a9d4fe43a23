"""`backend: openai` against a simulated speculative server (tests/spec_server.py): per-request
acceptance read from each response at any concurrency, counters polluted by another client's
traffic detected (and only then), Retry-After honoured up to its cap, custom headers from the
environment, a per-endpoint metrics_url, the server's facts in env.json, the request budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specbench.analysis.serving.spec_counters import SpecCounters
from specbench.cli.app import app
from specbench.config import parse_config
from specbench.harness.serving.drive.driver import run_engine
from specbench.harness.serving.openai import openai_http
from specbench.records import read_records
from tests.load_server import LoadServer
from tests.spec_server import SpecServer

REPO = Path(__file__).resolve().parents[2]


BASELINE: dict[str, str] = {}  # the baseline server's URL, set by the autouse fixture


@pytest.fixture(autouse=True)
def baseline_server() -> Iterator[None]:
    """Every run pairs the speculating server with a server without speculation (a run without
    one is refused): a plain streaming server (tests/load_server.py)."""
    with LoadServer() as base:
        BASELINE["url"] = base.url
        yield


def config(tmp_path: Path, url: str, **over: Any) -> dict[str, Any]:
    server = {"url": url, "gamma": 3, "label": "sim γ=3", "retries": 2, "timeout_s": 10.0}
    server["chat"] = True  # the server renders the prompt: no tokenizer to load here
    server.update(over.pop("server", {}))
    if "endpoints" not in server:  # the speculating server as an endpoint beside the baseline
        ep = {k: server.pop(k) for k in ("url", "gamma", "label") if k in server}
        server["endpoints"] = [ep]
    server["endpoints"] = [*server["endpoints"], {"url": BASELINE["url"], "gamma": 0}]
    cfg: dict[str, Any] = {
        "name": "sim",
        "backend": "openai",
        "target": {"model": "sim"},
        "server": server,
        "gammas": [3],
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 6}],
        "sampling": {"temperatures": [1.0]},
        "concurrency": [3],
        "max_new_tokens": 24,
        "warmup": 0,
        "seed": 3,
        "output_dir": str(tmp_path / "out"),
    }
    cfg.update(over)
    return cfg


def write_cfg(tmp_path: Path, cfg: dict[str, Any]) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return path


def cli(path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m specbench run` as users run it."""
    full = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "specbench", "run", str(path)],
        cwd=REPO,
        env=full,
        capture_output=True,
        text=True,
        timeout=240,
    )


def kinds(recs: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    """The records of these kinds from the speculating server (the baseline's set aside)."""
    return [r for r in recs if r["kind"] in names and r.get("gamma") != 0]


def entry(out: Path) -> dict[str, Any]:
    results = json.loads((out / "results.json").read_text())
    workloads = results["workloads"]
    return workloads[0] if isinstance(workloads, list) else next(iter(workloads.values()))


@pytest.fixture
def per_request_server() -> Iterator[SpecServer]:
    with SpecServer(gamma=3, alpha=0.6, p_stop=0.05, per_request_metrics=True) as srv:
        yield srv


def test_per_request_acceptance_at_concurrency_3_end_to_end(
    tmp_path: Path, per_request_server: SpecServer
) -> None:
    srv = per_request_server
    path = write_cfg(tmp_path, config(tmp_path, srv.url))
    res = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"}).invoke(app, ["run", str(path)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    recs = read_records(out / "records.jsonl")
    spec = kinds(recs, "spec")
    assert len(spec) == 6 and all(r["response_spec"]["source"] == "vllm_response" for r in spec)
    assert all("spec_counters" not in r for r in spec)  # no counter deltas per request at c=3
    # the per-request figures add up to exactly what the server's counters counted
    total = SpecCounters.from_dict(spec[0]["response_spec"])
    for r in spec[1:]:
        total = total.plus(SpecCounters.from_dict(r["response_spec"]))
    assert (total.drafts, total.accepted, total.draft_tokens) == (
        srv.drafts,
        srv.accepted,
        3 * srv.drafts,
    )
    assert list(total.per_pos) == srv.per_pos
    (metrics,) = kinds(recs, "engine_metrics")
    assert metrics["counters_polluted"] is False and metrics["reconciliation"]["excess"] >= 0
    e = entry(out)
    assert e["engine"]["acceptance_source"] == "per_request_response"
    g = e["engine"]["per_gamma"]["3"]
    assert g["units"] == 6  # prompts, not the one batch: intervals exist at concurrency 3
    lo, hi = g["accepted_tested"]["ci95"][:2]
    assert lo < g["accepted_tested"]["value"] < hi
    assert "the engine's own per-request figures" in (out / "report.md").read_text()
    info = json.loads((out / "env.json").read_text())["server_info"][srv.url]
    assert (info["server_version"], info["engine"], info["model_root"]) == (
        "0.0.sim",
        "vllm",
        "/models/sim",
    )


@pytest.mark.slow
def test_foreign_traffic_is_detected_and_its_counters_not_used(tmp_path: Path) -> None:
    with SpecServer(gamma=3, alpha=0.6, foreign_every=2, foreign_tokens=300) as srv:
        cfg = config(tmp_path, srv.url, concurrency=[1, 3])
        proc = cli(write_cfg(tmp_path, cfg))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert srv.foreign_requests == 6
    recs = read_records(tmp_path / "out" / "records.jsonl")
    metrics = kinds(recs, "engine_metrics")
    assert [m["counters_polluted"] for m in metrics] == [True, True]
    # at concurrency 1 the counters read around each request: every second request shares
    # its window with a foreign one
    flags = [r["counters_polluted"] for r in kinds(recs, "spec") if r["concurrency"] == 1]
    assert flags == [False, True] * 3
    # a warning line during the run, and the report's summary says so again (both on stderr)
    assert proc.stderr.count("show more work than specbench sent") == 4, proc.stderr
    e = entry(tmp_path / "out")
    assert e["engine"]["counters_polluted_batches"] == 2
    assert e["engine"]["acceptance_source"] == "per_request_counters"
    assert e["engine"]["per_gamma"]["3"]["units"] == 3  # the three clean prompts only
    assert "showed more work than specbench sent" in (tmp_path / "out" / "report.md").read_text()


def test_unshared_counters_are_not_flagged(tmp_path: Path) -> None:
    with SpecServer(gamma=4, alpha=0.8, p_stop=0.1) as srv:
        cfg = config(tmp_path, srv.url, concurrency=[1, 3], server={"gamma": 4}, gammas=[4])
        run_engine(parse_config(cfg, "test"), tmp_path / "out")
    recs = read_records(tmp_path / "out" / "records.jsonl")
    assert [m["counters_polluted"] for m in kinds(recs, "engine_metrics")] == [False, False]
    assert not any(r.get("counters_polluted") for r in kinds(recs, "spec"))


class Sleeps:
    """Record the waits `with_retries` asks for (and wait 0.01 s instead)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked: list[float] = []
        real = openai_http.time.sleep

        def sleep(s: float) -> None:
            self.asked.append(s)
            real(min(s, 0.01))

        monkeypatch.setattr(openai_http.time, "sleep", sleep)


@pytest.mark.parametrize(
    ("retry_after", "cap", "retries", "waits", "status"),
    [
        (["2"], 60.0, 2, [2.0], "ok"),  # what the server said
        (["30"], 0.5, 2, [0.5], "ok"),  # bounded by server.max_retry_after_s
        (["1", "1", "1"], 60.0, 2, [1.0, 1.0], "failed"),  # retries bounded
    ],
)
def test_retry_after_is_honoured_up_to_its_cap(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    retry_after: list[str],
    cap: float,
    retries: int,
    waits: list[float],
    status: str,
) -> None:
    sleeps = Sleeps(monkeypatch)
    with SpecServer(rate_limit=retry_after) as srv:
        cfg = config(
            tmp_path,
            srv.url,
            concurrency=[1],
            server={"retries": retries, "max_retry_after_s": cap},
        )
        cfg["workloads"][0]["n"] = 1
        run_engine(parse_config(cfg, "test"), tmp_path / "out")
        sent = len(srv.log)
    (rec,) = kinds(read_records(tmp_path / "out" / "records.jsonl"), "spec", "failed")
    assert rec["status"] == status and sent == min(len(retry_after) + 1, retries + 1)
    assert [w for w in sleeps.asked if w >= 0.05] == waits  # the counters' 0.02 s read gap aside
    if status == "failed":
        assert "HTTP 429: slow down (after 3 attempts)" in rec["error"]


def test_headers_from_the_environment(tmp_path: Path) -> None:
    runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
    secret, other = "t-0123456789", "ep-secret"
    with SpecServer(required_headers={"X-Tenant": secret, "X-Route": other}) as srv:
        cfg = config(
            tmp_path,
            srv.url,
            concurrency=[1],
            server={
                "headers": {"X-Tenant": "SB_TEST_TENANT", "X-Route": "SB_TEST_WRONG"},
                "endpoints": [
                    {"url": srv.url, "gamma": 3, "headers": {"X-Route": "SB_TEST_ROUTE"}}
                ],
            },
        )
        cfg["workloads"][0]["n"] = 2
        path = write_cfg(tmp_path, cfg)
        # a variable that is not set: one line, exit 2, nothing sent
        res = runner.invoke(app, ["run", str(path)], env={"SB_TEST_WRONG": "x"})
        assert res.exit_code == 2, res.output
        assert "server.headers.X-Tenant names the environment variable SB_TEST_TENANT" in res.output
        assert srv.log == []
        env = {"SB_TEST_TENANT": secret, "SB_TEST_ROUTE": other, "SB_TEST_WRONG": "wrong"}
        res = runner.invoke(app, ["run", str(path), "--force"], env=env)
        assert res.exit_code == 0, res.output
    recs = kinds(read_records(tmp_path / "out" / "records.jsonl"), "spec", "failed")
    assert [r["status"] for r in recs] == ["ok", "ok"]
    # the endpoint's header wins over the server's; values never reach the run directory
    assert {e["headers"]["X-Route"] for e in srv.log} == {other}
    for f in (tmp_path / "out").iterdir():
        if f.is_file():
            assert secret not in f.read_text(errors="replace"), f


def test_metrics_url_per_endpoint(tmp_path: Path) -> None:
    with SpecServer() as api, SpecServer() as replica:
        ep = {"url": api.url, "gamma": 3, "metrics_url": replica.url + "/metrics"}
        cfg = config(tmp_path, api.url, concurrency=[1], server={"endpoints": [ep]})
        cfg["workloads"][0]["n"] = 2
        run_engine(parse_config(cfg, "test"), tmp_path / "out")
        assert api.metrics_reads == 0 and replica.metrics_reads > 0
    # the replica decoded nothing: zero drafts counted while specbench received tokens
    (m,) = kinds(read_records(tmp_path / "out" / "records.jsonl"), "engine_metrics")
    assert m["spec_counters"]["num_drafts"] == 0 and m["counters_polluted"] is False


def test_request_budget_stops_the_run_and_resume_finishes(tmp_path: Path) -> None:
    runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
    with SpecServer() as srv:
        # the baseline's 6 requests go first, then 4 of the speculating server's
        cfg = config(tmp_path, srv.url, concurrency=[1], server={"max_requests": 10})
        path = write_cfg(tmp_path, cfg)
        res = runner.invoke(app, ["run", str(path)])
        assert res.exit_code == 2, res.output
        assert "server.max_requests (10) reached" in res.output and len(srv.log) == 4
        assert len(kinds(read_records(tmp_path / "out" / "records.jsonl"), "spec")) == 4
        cfg["server"]["max_requests"] = 10
        write_cfg(tmp_path, cfg)
        res = runner.invoke(app, ["run", str(path), "--resume"])
        assert res.exit_code == 0, res.output
        assert len(srv.log) == 6
    assert len(kinds(read_records(tmp_path / "out" / "records.jsonl"), "spec")) == 6
