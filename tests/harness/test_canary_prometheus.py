"""`specbench canary` against a real Prometheus server (Debian's binary) scraping engine
stand-ins on 127.0.0.1 every 250 ms: a canary and its control per scenario, with planted
differences (slower TPOT, more errors, a non-lossless canary shifting output lengths) and none
(A/A). Each planted regression must end in roll back naming its guard; the A/A canary in promote
or keep watching. Request logs served over HTTP carry the acceptance drop in one bucket.
Skipped with the reason when the prometheus binary is absent (.ci/run installs it)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from specbench.cli.app import app
from tests.harness.canary_servers import Engine, Files, Plant, Traffic
from tests.unit.canary_logs import write_logs

PROMETHEUS = shutil.which("prometheus")
runner = CliRunner(env={"COLUMNS": "140", "NO_COLOR": "1"})

SCENARIOS = {
    "aa": Plant(speculative=True),
    "tpot": Plant(speculative=True, tpot_factor=1.6),
    "errors": Plant(speculative=True, error_rate=0.25),
    "lengths": Plant(speculative=True, length_factor=1.8),
}
EXPECT = {"tpot": {"tpot"}, "errors": {"errors"}, "lengths": {"output_length", "e2e", "e2e_slo"}}
WINDOW_S, RUN_S = 2, 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def prometheus(tmp_path: Path) -> Iterator[tuple[str, dict[str, tuple[Engine, Engine]]]]:
    if PROMETHEUS is None:
        pytest.skip("prometheus not installed (apt-get install prometheus; .ci/run does)")
    engines = {name: (Engine(p), Engine(Plant())) for name, p in SCENARIOS.items()}
    jobs = []
    for name, (c, k) in engines.items():
        jobs += [
            {"job_name": f"{name}-canary", "static_configs": [{"targets": [c.address]}]},
            {"job_name": f"{name}-control", "static_configs": [{"targets": [k.address]}]},
        ]
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "250ms", "scrape_timeout": "200ms"},
                "scrape_configs": jobs,
            }
        )
    )
    port = _free_port()
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if httpx2.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            time.sleep(0.1)
        else:
            pytest.fail("prometheus did not become ready in 10 s")
        yield url, engines
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for c, k in engines.values():
            c.close()
            k.close()


def _config(tmp_path: Path, url: str, name: str, start: float) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"""name: {name}
window_s: {WINDOW_S}
min_windows: 4
n_opt: 10
start: {datetime.fromtimestamp(start, UTC).isoformat()}
guards:
  tpot: {{slo_ms: 50}}
  e2e: {{slo_ms: 10000}}
  acceptance: {{buckets: [all]}}
sources:
  prometheus: {{url: "{url}", canary: 'job="{name}-canary"', control: 'job="{name}-control"', lag_s: 1}}
state: {name}-state.jsonl
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.slow
def test_planted_regressions_roll_back_and_aa_does_not(tmp_path: Path, prometheus) -> None:  # type: ignore[no-untyped-def]
    url, engines = prometheus
    start = time.time()
    with Traffic(list(engines.values()), rate_per_s=60):
        time.sleep(RUN_S)
    results = {}
    for name in SCENARIOS:
        r = runner.invoke(
            app, ["canary", str(_config(tmp_path, url, name, start)), "--once", "--json"]
        )
        assert r.exit_code in (0, 10, 11), r.output
        results[name] = (r.exit_code, json.loads(r.stdout))
    for name, (code, doc) in results.items():
        assert doc["windows"] >= 10, (name, doc["windows"])  # Prometheus held every window
        if name == "aa":
            assert code in (0, 10) and doc["crossed"] == [], doc["reason"]
        else:
            assert code == 11, (name, doc["reason"])
            assert EXPECT[name] & set(doc["crossed"]), (name, doc["crossed"])
    # the histogram source says what it approximated: means, and SLO shares at bucket edges
    tpot = next(g for g in results["tpot"][1]["guards"] if g["key"] == "tpot")
    assert tpot["estimate"] > 0.3  # log(1.6) = 0.47, read from _sum / _count
    # request logs served by the same stand-ins, with Prometheus filling what the rows lack (the
    # acceptance counters): medians from the logs, the slower canary still named
    (c, k) = engines["tpot"]
    both = tmp_path / "both.yaml"
    logs = f'  logs: {{canary: "http://{c.address}/logs.jsonl", control: "http://{k.address}/logs.jsonl"}}\n'
    text = _config(tmp_path, url, "tpot", start).read_text()
    both.write_text(
        text.replace("state: tpot-state", "state: both-state").replace(
            "sources:\n", "sources:\n" + logs
        )
    )
    r = runner.invoke(app, ["canary", str(both), "--once", "--json"])
    assert r.exit_code == 11, r.output
    doc = json.loads(r.stdout)
    assert "tpot" in doc["crossed"] and doc["windows"] >= 10
    accept = next(g for g in doc["guards"] if g["key"] == "acceptance[all]")
    assert accept["windows"] >= 10  # from the Prometheus counters
    first = json.loads((tmp_path / "both-state.jsonl").read_text().splitlines()[0])
    assert first["source"] == "logs+prometheus" and first["canary"]["center"] == "median"
    # a second look resumes: no window is read twice
    again = runner.invoke(app, ["canary", str(tmp_path / "aa.yaml"), "--once", "--json"])
    seqs = [json.loads(x)["seq"] for x in (tmp_path / "aa-state.jsonl").read_text().splitlines()]
    assert len(seqs) == len(set(seqs)) and json.loads(again.stdout)["windows"] == len(seqs)


@pytest.mark.slow
def test_acceptance_drop_in_one_bucket_from_logs_over_http(tmp_path: Path) -> None:
    write_logs(tmp_path / "c.jsonl", 21, 90, canary=True, acceptance={"chat": 0.7, "code": 0.2})
    write_logs(tmp_path / "k.jsonl", 22, 90, canary=False)
    files = Files({n: (tmp_path / n).read_bytes() for n in ("c.jsonl", "k.jsonl")})
    try:
        cfg = tmp_path / "logs.yaml"
        cfg.write_text(
            f"""guards: {{acceptance: {{buckets: [chat, code]}}}}
sources:
  logs: {{canary: "{files.url("c.jsonl")}", control: "{files.url("k.jsonl")}", fields: {{bucket: bucket}}}}
state: state.jsonl
""",
            encoding="utf-8",
        )
        r = runner.invoke(app, ["canary", str(cfg), "--once", "--json"])
    finally:
        files.close()
    assert r.exit_code == 11, r.output
    assert json.loads(r.stdout)["crossed"] == ["acceptance[code]"]
