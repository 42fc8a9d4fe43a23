"""`backend: openai` against a misbehaving server (tests/fault_server.py): every fault is either
retried to a good measurement or recorded as failed with its reason, never measured as `ok`;
records are on disk as requests complete, so kill -9 and Ctrl-C mid-batch lose at most the
requests in flight, and `--resume` finishes the run with each unit exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specbench.analysis.estimators.groups import unresolved_failures
from specbench.cli.app import app
from specbench.cli.run import run_incomplete
from specbench.config import RunConfig, parse_config
from specbench.harness.plan.plan import RunOutcome, SilentEvents, load_prompts
from specbench.harness.serving.drive.driver import run_engine
from specbench.record_line import UnitFinished
from specbench.records import read_records
from tests.fault_server import FaultServer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    """A well-behaved server by default; tests set `plan` / `faults_by_marker`."""
    with FaultServer(lifetime_s=300.0) as srv:
        yield srv


def config(tmp_path: Path, url: str, **over: Any) -> dict[str, Any]:
    server = {"url": url, "gamma": 0, "retries": 2, "timeout_s": 5.0}
    server.update(over.pop("server", {}))
    cfg: dict[str, Any] = {
        "name": "faults",
        "backend": "openai",
        "target": {"model": "fault"},
        "server": server,
        "workloads": [{"name": "tiny_code", "dataset": {"name": "tiny_code"}, "n": 1}],
        "sampling": {"temperatures": [0.0]},
        "concurrency": [1],
        "max_new_tokens": 6,
        "warmup": 0,
        "output_dir": str(tmp_path / "out"),
    }
    cfg.update(over)
    return cfg


def run_in_process(
    tmp_path: Path, cfg: dict[str, Any], resume: bool = False
) -> tuple[RunOutcome, list[dict[str, Any]]]:
    parsed = parse_config(cfg, "test config")
    out = tmp_path / "out"
    outcome = run_engine(parsed, out, resume=resume)
    return outcome, read_records(out / "records.jsonl")


def requests(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in recs if r["kind"] in ("baseline", "spec", "failed")]


def prompt_texts(cfg: dict[str, Any]) -> list[str]:
    """The first turn of each prompt of the config's workload, in order (markers for faults)."""
    parsed: RunConfig = parse_config(cfg, "test config")
    return [p.turns[0] for p in next(iter(load_prompts(parsed, None).values()))]


# ---------------------------------------------------------------------------------------------
# one fault per request


@pytest.mark.parametrize(
    ("plan", "retries", "status", "error", "served"),
    [
        # transient: retried to a good measurement
        (["http_503"], 2, "ok", None, ["http_503", "ok"]),
        (["disconnect"], 1, "ok", None, ["disconnect", "ok"]),
        (["no_end"], 1, "ok", None, ["no_end", "ok"]),
        # out of retries: failed, with the reason
        (["http_503"] * 3, 2, "failed", "HTTP 503: overloaded (after 3 attempts)", ["http_503"] * 3),
        (["disconnect"], 0, "failed", "RemoteProtocolError", ["disconnect"]),
        (
            ["no_end"],
            0,
            "failed",
            "stream ended without a finish_reason and [DONE] after 6 chunks",
            ["no_end"],
        ),
        (["no_done"], 0, "failed", "stream ended without [DONE] after 6 chunks", ["no_done"]),
        # a protocol violation is failed at once: the server would send it again
        (["malformed"], 2, "failed", "malformed stream chunk 1 (chunk: Invalid JSON", ["malformed"]),
        (["bad_shape"], 2, "failed", "malformed stream chunk 1 (choices: Input should be", ["bad_shape"]),
    ],
)  # fmt: skip
def test_each_fault_is_retried_or_recorded_failed(
    tmp_path: Path,
    fault_server: FaultServer,
    plan: list[str],
    retries: int,
    status: str,
    error: str | None,
    served: list[str],
) -> None:
    fault_server.plan = list(plan)
    cfg = config(tmp_path, fault_server.url, server={"retries": retries})
    outcome, recs = run_in_process(tmp_path, cfg)
    (rec,) = requests(recs)
    assert fault_server.faults_served() == served
    assert rec["status"] == status
    if status == "ok":
        assert rec["new_tokens"] == 6 and rec["answers"] == ["x" * 6]  # the retry's stream only
        assert rec["stop_reason"] == ["length"] and outcome.failures == []
    else:
        assert error is not None and error in rec["error"], rec["error"]
        assert [f["prompt_id"] for f in outcome.failures] == [rec["prompt_id"]]
    # the batch's metrics record comes after its request
    assert recs[-1]["kind"] == "engine_metrics" and recs[-1]["n_failed"] == (status == "failed")


def test_hang_past_the_timeout_fails_within_the_timeout(
    tmp_path: Path, fault_server: FaultServer
) -> None:
    fault_server.plan = ["hang"]
    fault_server.hang_s = 10.0
    cfg = config(tmp_path, fault_server.url, server={"retries": 0, "timeout_s": 0.5})
    t0 = time.monotonic()
    _, recs = run_in_process(tmp_path, cfg)
    elapsed = time.monotonic() - t0
    (rec,) = requests(recs)
    assert rec["status"] == "failed" and rec["error"].startswith("timed out (ReadTimeout)")
    assert elapsed < 8.0  # the read timeout, not the 10 s the server hangs


def test_429_waits_for_retry_after(tmp_path: Path, fault_server: FaultServer) -> None:
    fault_server.plan = ["http_429"]
    _, recs = run_in_process(tmp_path, config(tmp_path, fault_server.url))
    (rec,) = requests(recs)
    assert rec["status"] == "ok" and fault_server.faults_served() == ["http_429", "ok"]
    first, second = (e["t"] for e in fault_server.log)
    # Retry-After: 1, where the default backoff would have waited 0.5 s
    assert second - first >= 0.95


def test_server_without_metrics_is_measured_without_acceptance(tmp_path: Path) -> None:
    with FaultServer(metrics=False, lifetime_s=30.0) as srv:
        # a run needs a server without speculation: the same server stands in for it here
        eps = [{"url": srv.url, "gamma": 0}, {"url": srv.url, "gamma": 2}]
        cfg = config(tmp_path, srv.url, server={"endpoints": eps}, gammas=[2])
        outcome, recs = run_in_process(tmp_path, cfg)
    (rec,) = [r for r in requests(recs) if r["gamma"] == 2]
    assert rec["status"] == "ok" and "spec_counters" not in rec
    metrics = recs[-1]
    assert metrics["kind"] == "engine_metrics"
    assert metrics["metrics_available"] is False and metrics["acceptance_available"] is False
    assert any("no /metrics endpoint" in w for w in outcome.warnings)


# ---------------------------------------------------------------------------------------------
# records as they happen, and --resume


class DiskCheck(SilentEvents):
    """Run events that read records.jsonl whenever a request finishes: its record must be the
    file's last line already, with no metrics record for the batch yet."""

    def __init__(self, path: Path) -> None:
        self.path, self.seen = path, 0

    def planned(self, total_units: int, already_done: int) -> None:
        pass

    def unit_started(self, workload: str, temperature: float, label: str, prompt_id: str) -> None:
        pass

    def unit_finished(self, unit: UnitFinished) -> None:
        on_disk = read_records(self.path)
        assert on_disk[-1]["prompt_id"] == unit.prompt_id  # the line is on disk first
        batch = [r for r in on_disk if r.get("concurrency") == on_disk[-1]["concurrency"]]
        assert not any(r["kind"] == "engine_metrics" for r in batch)
        self.seen += 1


def test_records_are_on_disk_before_the_batch_ends(
    tmp_path: Path, fault_server: FaultServer
) -> None:
    cfg = config(tmp_path, fault_server.url, concurrency=[1, 3])
    cfg["workloads"][0]["n"] = 5
    check = DiskCheck(tmp_path / "out" / "records.jsonl")
    run_engine(parse_config(cfg, "test config"), tmp_path / "out", events=check)
    assert check.seen == 10
    recs = read_records(tmp_path / "out" / "records.jsonl")
    assert [r["kind"] for r in recs] == ["baseline"] * 5 + ["engine_metrics"] + ["baseline"] * 5 + [
        "engine_metrics"
    ]


def test_resume_retries_failed_requests_only(tmp_path: Path, fault_server: FaultServer) -> None:
    cfg = config(tmp_path, fault_server.url, server={"retries": 0})
    cfg["workloads"][0]["n"] = 3
    texts = prompt_texts(cfg)
    fault_server.faults_by_marker = {texts[1]: "http_503"}
    outcome, _ = run_in_process(tmp_path, cfg)
    assert len(outcome.failures) == 1
    fault_server.faults_by_marker = {}
    n_before = len(fault_server.log)
    outcome, recs = run_in_process(tmp_path, cfg, resume=True)
    # only the failed prompt was sent again
    assert len(fault_server.log) == n_before + 1
    assert texts[1] in fault_server.log[-1]["body"]["prompt"]
    assert outcome.skipped == 2 and outcome.written == 1 and outcome.failures == []
    ok = Counter(r["prompt_id"] for r in recs if r["kind"] == "baseline")
    assert sorted(ok.values()) == [1, 1, 1] and unresolved_failures(recs) == []
    failed = [r for r in recs if r["kind"] == "failed"]
    assert len(failed) == 1 and ok[failed[0]["prompt_id"]] == 1
    metrics = [r for r in recs if r["kind"] == "engine_metrics"]
    assert [(m["n_requests"], m["n_planned"], m["partial"]) for m in metrics] == [
        (3, 3, False),
        (1, 3, True),
    ]
    # a third run has nothing left to do
    outcome, _ = run_in_process(tmp_path, cfg, resume=True)
    assert outcome.written == 0 and outcome.skipped == 3 and len(fault_server.log) == n_before + 1


def testrun_incomplete_threshold() -> None:
    def outcome(failed: int, written: int, skipped: int) -> RunOutcome:
        o = RunOutcome(Path("."), written=written, skipped=skipped)
        o.failures = [{"error": f"HTTP 503:\n overloaded {i}"} for i in range(failed)]
        return o

    assert run_incomplete(outcome(0, 20, 0), 0.0) is None
    assert run_incomplete(outcome(1, 10, 10), 0.05) is None  # 1 of 20 = 5 %: not above
    msg = run_incomplete(outcome(2, 10, 10), 0.05)
    assert msg is not None and "\n" not in msg
    assert msg.startswith("run incomplete: 2 of 20 prompts failed (10%, above --max-failure-rate")
    assert "first: HTTP 503: overloaded 0" in msg
    assert run_incomplete(outcome(2, 10, 10), 0.1) is None


# ---------------------------------------------------------------------------------------------
# kill -9 and Ctrl-C mid-batch, through `python -m specbench` as users run it


def _as_from_a_shell() -> None:
    """The child's Ctrl-C as a shell gives it: SIGINT at its default and not blocked. A process
    inherits an ignored or blocked SIGINT from its parent (and Python then leaves it ignored), and
    the test worker's state depends on what ran before it in that process: seen in `make test`,
    where the run ignored the SIGINT below and this test timed out, while it passed alone."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def start_run(cfg_path: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "specbench", "run", str(cfg_path), *extra],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_from_a_shell,
    )


def wait_for_lines(path: Path, n: int, proc: subprocess.Popen[str], timeout: float = 180.0) -> int:
    """Wait until records.jsonl holds n request lines; return how many it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file():
            count = sum(
                1 for line in path.read_text().splitlines() if '"engine_metrics"' not in line
            )
            if count >= n:
                return count
        if proc.poll() is not None:
            pytest.fail(f"the run ended early ({proc.returncode}): {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"records.jsonl did not reach {n} lines in {timeout} s")


def finish(proc: subprocess.Popen[str], timeout: float = 120.0) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the run did not end in {timeout} s: {err[-2000:]}")
    return proc.returncode, out, err


def check_complete(recs: list[dict[str, Any]], n_prompts: int, concurrency: list[int]) -> None:
    """Each unit (prompt × concurrency) has exactly one successful record, no failure left."""
    ok = Counter((r["prompt_id"], r["concurrency"]) for r in recs if r["kind"] == "baseline")
    assert len(ok) == n_prompts * len(concurrency) and set(ok.values()) == {1}, ok
    assert unresolved_failures(recs) == []
    for c in concurrency:
        assert any(r["kind"] == "engine_metrics" and r["concurrency"] == c for r in recs)


@pytest.mark.slow
def test_kill_9_and_ctrl_c_mid_batch_then_resume(tmp_path: Path, fault_server: FaultServer) -> None:
    cfg = config(
        tmp_path, fault_server.url, concurrency=[1, 3], server={"retries": 0, "timeout_s": 90.0}
    )
    cfg["workloads"][0]["n"] = 6
    texts = prompt_texts(cfg)
    # a hanging request outlives the client's timeout_s, which outlives the test's bounds
    fault_server.hang_s = 120.0
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    records = tmp_path / "out" / "records.jsonl"

    # 1. kill -9 in the concurrency-1 batch: prompt 1 fails; prompt 3 hangs, in flight
    fault_server.faults_by_marker = {texts[1]: "http_503", texts[3]: "hang"}
    proc = start_run(path)
    wait_for_lines(records, 3, proc)
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    recs = read_records(records)
    # the requests that completed are on disk; the batch's metrics record is not
    assert [r["kind"] for r in recs] == ["baseline", "failed", "baseline"]

    # 2. --resume, then Ctrl-C in the concurrency-3 batch with prompt 5 hanging (its first request,
    # at concurrency 1, is answered; its second hangs)
    fault_server.faults_by_marker = {texts[5]: ["ok", "hang"]}
    sent_before = len(fault_server.log)
    proc = start_run(path, "--resume")
    wait_for_lines(records, 3 + 4 + 5, proc)
    resent = [e["body"]["prompt"] for e in fault_server.log[sent_before : sent_before + 4]]
    # the failed prompt 1, prompt 3 (in flight when killed), 4 and 5; not 0 and 2
    assert all(any(texts[i] in p for p in resent) for i in (1, 3, 4, 5)), resent
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    code, _, err = finish(proc, timeout=80)
    # not after the hanging request (its timeout is 90 s): in-flight requests are dropped
    assert code == 130 and time.monotonic() - t0 < 60.0, (code, time.monotonic() - t0, err)
    assert "interrupted: the records written so far are kept in" in err and "Traceback" not in err
    recs = read_records(records)
    assert len(requests(recs)) == 12
    assert [(r["kind"], r["concurrency"]) for r in recs if r["kind"] == "engine_metrics"] == [
        ("engine_metrics", 1)
    ]

    # 3. --resume (in process) finishes the one request lost in flight
    fault_server.faults_by_marker = {}
    sent_before = len(fault_server.log)
    res = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"}).invoke(
        app, ["run", str(path), "--resume"]
    )
    assert res.exit_code == 0, res.output
    assert "1 records written, 11 already complete, 0 failed" in res.output
    assert len(fault_server.log) == sent_before + 1
    recs = read_records(records)
    check_complete(recs, 6, [1, 3])
    batches = [
        (m["concurrency"], m["n_requests"], m["partial"])
        for m in recs
        if m["kind"] == "engine_metrics"
    ]
    assert batches == [(1, 4, True), (3, 1, True)]
